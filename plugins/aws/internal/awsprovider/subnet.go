package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindSubnet is a subnet inside one of our VPCs; it waits for the NAT
// gateways placed in it.
const KindSubnet = "subnet"

func init() {
	register(kind{name: KindSubnet, inVPC: listSubnets, deps: subnetDeps, remove: withEC2(removeSubnet)})
}

func listSubnets(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	all, err := everyPage(ctx, ec2.NewDescribeSubnetsPaginator(c, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("vpc-id", vpcID)}}),
		func(o *ec2.DescribeSubnetsOutput) []ec2types.Subnet { return o.Subnets })
	var out []vpcItem
	for _, s := range all {
		out = append(out, itemIn(vpcID, KindSubnet, aws.ToString(s.SubnetId), s.Tags))
	}
	return out, err
}

func subnetDeps(it vpcItem, vpc []vpcItem) []string {
	var deps []string
	for _, n := range ofKind(vpc, KindNATGateway) {
		if n.subnet == it.res.ID {
			deps = append(deps, n.res.ID)
		}
	}
	return deps
}

func removeSubnet(ctx context.Context, c *ec2.Client, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	_, err := c.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(r.ID)})
	return classify(err, deleted)
}
