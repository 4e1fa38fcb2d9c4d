package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindElasticIP is an Elastic IP tagged as owned by a target's cluster. The
// network scan (vpc.go) lists it after the VPCs, because it waits for the
// NAT gateways holding its address.
const KindElasticIP = "elastic-ip"

func init() {
	register(kind{name: KindElasticIP, remove: withEC2(removeElasticIP)})
}

// scanElasticIPs reports the cluster's Elastic IPs, each after the NAT
// gateways among inVPC that hold it.
func (p *Provider) scanElasticIPs(ctx context.Context, c *ec2.Client, t Target, owner ec2types.Filter, ownerEvidence string, inVPC []vpcItem, e *emitter) {
	users := map[string][]string{}
	for _, n := range ofKind(inVPC, KindNATGateway) {
		for _, id := range n.eips {
			users[id] = append(users[id], n.res.ID)
		}
	}
	// DescribeAddresses has no pagination.
	out, err := c.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{Filters: []ec2types.Filter{owner, filter("domain", "vpc")}})
	if err != nil {
		e.failed(KindElasticIP, t.Region, err)
		return
	}
	for _, a := range out.Addresses {
		id := aws.ToString(a.AllocationId)
		e.resource(sdk.Resource{Kind: KindElasticIP, ID: id, Region: t.Region, Cluster: t.Cluster, Tags: ec2Tags(a.Tags),
			Evidence: []string{ownerEvidence}, DependsOn: users[id]})
	}
}

func removeElasticIP(ctx context.Context, c *ec2.Client, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	_, err := c.ReleaseAddress(ctx, &ec2.ReleaseAddressInput{AllocationId: aws.String(r.ID)})
	return classify(err, deleted)
}
