package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindVPC is a VPC tagged as owned by a target's cluster
// (sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned). Its scan
// lists, inside each such VPC, every kind that declares inVPC, and then the
// cluster's Elastic IPs; the VPC waits for everything in it.
const KindVPC = "vpc"

func init() {
	register(kind{name: KindVPC, scanTarget: (*Provider).scanNetwork, remove: withEC2(removeVPC)})
}

// scanNetwork lists the cluster's CAPA-owned VPCs and everything in them,
// and the cluster's Elastic IPs.
func (p *Provider) scanNetwork(ctx context.Context, t Target, e *emitter) {
	c, err := p.c.ec2(ctx, t.Region)
	if err != nil {
		e.failed(KindVPC, t.Region, err)
		return
	}
	owner := filter("tag:"+OwnerTag(t.Cluster), "owned")
	ownerEvidence := "tag " + OwnerTag(t.Cluster) + "=owned"
	vpcs, err := everyPage(ctx, ec2.NewDescribeVpcsPaginator(c, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{owner}}),
		func(o *ec2.DescribeVpcsOutput) []ec2types.Vpc { return o.Vpcs })
	if err != nil {
		e.failed(KindVPC, t.Region, err)
		return
	}
	var inAll []vpcItem
	for _, vpc := range vpcs {
		inAll = append(inAll, p.scanVPC(ctx, c, t, vpc, ownerEvidence, e)...)
	}
	p.scanElasticIPs(ctx, c, t, owner, ownerEvidence, inAll, e)
}

// scanVPC reports one VPC and what the inVPC kinds find in it, each with
// the dependencies its kind declares, and returns those items.
func (p *Provider) scanVPC(ctx context.Context, c *ec2.Client, t Target, vpc ec2types.Vpc, ownerEvidence string, e *emitter) []vpcItem {
	vpcID := aws.ToString(vpc.VpcId)
	var inVPC []kind
	for _, k := range registryOrder {
		if k.inVPC != nil {
			inVPC = append(inVPC, k)
		}
	}
	lists := make([][]vpcItem, len(inVPC))
	var fns []func()
	for i, k := range inVPC {
		fns = append(fns, func() {
			items, err := k.inVPC(ctx, c, vpcID)
			if err != nil {
				e.failed(k.name, t.Region, err)
				return
			}
			lists[i] = items
		})
	}
	p.parallel(fns...)
	var all []vpcItem
	for _, items := range lists {
		for _, it := range items {
			it.res.Region, it.res.Cluster = t.Region, t.Cluster
			all = append(all, it)
		}
	}
	r := sdk.Resource{Kind: KindVPC, ID: vpcID, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(vpc.Tags), Evidence: []string{ownerEvidence}}
	for i, it := range all {
		if k := registry[it.res.Kind]; k.deps != nil {
			all[i].res.DependsOn = k.deps(it, all)
		}
		e.resource(all[i].res)
		r.DependsOn = append(r.DependsOn, it.res.ID)
	}
	e.resource(r)
	return all
}

// itemsIn is the shared shape of an inVPC listing: evidence says the
// resource is inside the VPC (which is ours by its tag).
func itemIn(vpcID, kindName, id string, tags []ec2types.Tag) vpcItem {
	return vpcItem{res: sdk.Resource{Kind: kindName, ID: id, Tags: ec2Tags(tags), Evidence: []string{"in VPC " + vpcID}}}
}

func ofKind(items []vpcItem, kindName string) []vpcItem {
	var out []vpcItem
	for _, it := range items {
		if it.res.Kind == kindName {
			out = append(out, it)
		}
	}
	return out
}

func removeVPC(ctx context.Context, c *ec2.Client, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	_, err := c.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(r.ID)})
	return classify(err, deleted)
}

// ec2Pager is an EC2 paginator (ec2.New...Paginator).
type ec2Pager[O any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*ec2.Options)) (O, error)
}

// everyPage reads every page of p and returns the items of each.
func everyPage[O, T any](ctx context.Context, p ec2Pager[O], items func(O) []T) ([]T, error) {
	var out []T
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, items(page)...)
	}
	return out, nil
}

// withEC2 adapts a deletion that needs the EC2 client of r's region.
func withEC2(remove func(context.Context, *ec2.Client, sdk.Resource, sweep.Attempt) sweep.Result) func(context.Context, *Provider, sdk.Resource, sweep.Attempt) sweep.Result {
	return func(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
		c, err := p.c.ec2(ctx, p.regionOf(r))
		if err != nil {
			return failedClient(err)
		}
		return remove(ctx, c, r, a)
	}
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}
