package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/rds"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindRDSInstance is an RDS instance a target names exactly.
const KindRDSInstance = "rds-instance"

func init() {
	register(kind{name: KindRDSInstance, scanTarget: (*Provider).scanRDS, remove: removeRDSInstance})
}

func (p *Provider) scanRDS(ctx context.Context, t Target, e *emitter) {
	if t.RDSInstance == "" {
		return
	}
	c, err := p.c.rds(ctx, t.Region)
	if err != nil {
		e.failed(KindRDSInstance, t.Region, err)
		return
	}
	out, err := c.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(t.RDSInstance)})
	if apiCode(err) == "DBInstanceNotFound" || apiCode(err) == "DBInstanceNotFoundFault" {
		return
	}
	if err != nil {
		e.failed(KindRDSInstance, t.Region, err)
		return
	}
	for _, db := range out.DBInstances {
		tags := map[string]string{}
		for _, tg := range db.TagList {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		e.resource(sdk.Resource{Kind: KindRDSInstance, ID: aws.ToString(db.DBInstanceIdentifier), Region: t.Region, Cluster: t.Cluster,
			CreatedAt: db.InstanceCreateTime, Tags: tags, Evidence: []string{evidenceName(t.RDSKey, t.RDSInstance)}})
	}
}

func removeRDSInstance(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
	c, err := p.c.rds(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	id, started := r.ID, a.Polling
	out, err := c.DescribeDBInstances(ctx, &rds.DescribeDBInstancesInput{DBInstanceIdentifier: aws.String(id)})
	if err != nil {
		return classify(err, deleted)
	}
	if len(out.DBInstances) == 0 {
		return gone
	}
	db := out.DBInstances[0]
	if started || aws.ToString(db.DBInstanceStatus) == "deleting" {
		return result(sweep.InProgress, "instance "+aws.ToString(db.DBInstanceStatus))
	}
	if aws.ToBool(db.DeletionProtection) {
		_, err := c.ModifyDBInstance(ctx, &rds.ModifyDBInstanceInput{DBInstanceIdentifier: aws.String(id), DeletionProtection: aws.Bool(false), ApplyImmediately: aws.Bool(true)})
		if a, ok := step(err); !ok {
			return a
		}
	}
	_, err = c.DeleteDBInstance(ctx, &rds.DeleteDBInstanceInput{DBInstanceIdentifier: aws.String(id), SkipFinalSnapshot: aws.Bool(true), DeleteAutomatedBackups: aws.Bool(true)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}
