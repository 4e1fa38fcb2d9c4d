package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindInternetGateway is an internet gateway attached to one of our VPCs.
// It waits for everything that may hold public addresses (the NAT gateways
// and subnets), is detached, then deleted.
const KindInternetGateway = "internet-gateway"

func init() {
	register(kind{name: KindInternetGateway, inVPC: listInternetGateways, deps: internetGatewayDeps, remove: withEC2(removeInternetGateway)})
}

func listInternetGateways(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	igws, err := everyPage(ctx, ec2.NewDescribeInternetGatewaysPaginator(c, &ec2.DescribeInternetGatewaysInput{Filters: []ec2types.Filter{filter("attachment.vpc-id", vpcID)}}),
		func(o *ec2.DescribeInternetGatewaysOutput) []ec2types.InternetGateway { return o.InternetGateways })
	var out []vpcItem
	for _, g := range igws {
		it := itemIn(vpcID, KindInternetGateway, aws.ToString(g.InternetGatewayId), g.Tags)
		it.res.Evidence = []string{"attached to VPC " + vpcID}
		out = append(out, it)
	}
	return out, err
}

func internetGatewayDeps(_ vpcItem, vpc []vpcItem) []string {
	var deps []string
	for _, it := range append(ofKind(vpc, KindNATGateway), ofKind(vpc, KindSubnet)...) {
		deps = append(deps, it.res.ID)
	}
	return deps
}

func removeInternetGateway(ctx context.Context, c *ec2.Client, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	id := aws.String(r.ID)
	out, err := c.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{InternetGatewayIds: []string{r.ID}})
	if err != nil {
		return classify(err, deleted)
	}
	for _, g := range out.InternetGateways {
		for _, a := range g.Attachments {
			_, err := c.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: id, VpcId: a.VpcId})
			if res, ok := step(err); !ok {
				return res
			}
		}
	}
	_, err = c.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: id})
	return classify(err, deleted)
}
