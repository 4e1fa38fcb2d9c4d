package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindNATGateway is a NAT gateway inside one of our VPCs. Its deletion is
// asynchronous: accepted, then polled until the gateway is deleted.
const KindNATGateway = "nat-gateway"

func init() {
	register(kind{name: KindNATGateway, inVPC: listNATGateways, remove: withEC2(removeNATGateway)})
}

func listNATGateways(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	nats, err := everyPage(ctx, ec2.NewDescribeNatGatewaysPaginator(c, &ec2.DescribeNatGatewaysInput{Filter: []ec2types.Filter{filter("vpc-id", vpcID), filter("state", "pending", "available", "deleting")}}),
		func(o *ec2.DescribeNatGatewaysOutput) []ec2types.NatGateway { return o.NatGateways })
	var out []vpcItem
	for _, n := range nats {
		it := itemIn(vpcID, KindNATGateway, aws.ToString(n.NatGatewayId), n.Tags)
		it.res.CreatedAt = n.CreateTime
		it.subnet = aws.ToString(n.SubnetId)
		for _, a := range n.NatGatewayAddresses {
			if a.AllocationId != nil {
				it.eips = append(it.eips, *a.AllocationId)
			}
		}
		out = append(out, it)
	}
	return out, err
}

func removeNATGateway(ctx context.Context, c *ec2.Client, r sdk.Resource, a sweep.Attempt) sweep.Result {
	if a.Polling {
		out, err := c.DescribeNatGateways(ctx, &ec2.DescribeNatGatewaysInput{NatGatewayIds: []string{r.ID}})
		if err != nil {
			return classify(err, deleted)
		}
		if len(out.NatGateways) == 0 || out.NatGateways[0].State == ec2types.NatGatewayStateDeleted {
			return deleted
		}
		return result(sweep.InProgress, "NAT gateway "+string(out.NatGateways[0].State))
	}
	_, err := c.DeleteNatGateway(ctx, &ec2.DeleteNatGatewayInput{NatGatewayId: aws.String(r.ID)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}
