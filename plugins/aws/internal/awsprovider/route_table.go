package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindRouteTable is a route table of one of our VPCs other than its main
// one, which goes with the VPC. Its subnet associations are removed first.
const KindRouteTable = "route-table"

func init() {
	register(kind{name: KindRouteTable, inVPC: listRouteTables, remove: withEC2(removeRouteTable)})
}

func listRouteTables(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	all, err := everyPage(ctx, ec2.NewDescribeRouteTablesPaginator(c, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{filter("vpc-id", vpcID)}}),
		func(o *ec2.DescribeRouteTablesOutput) []ec2types.RouteTable { return o.RouteTables })
	var out []vpcItem
	for _, rt := range all {
		if !isMain(rt) {
			out = append(out, itemIn(vpcID, KindRouteTable, aws.ToString(rt.RouteTableId), rt.Tags))
		}
	}
	return out, err
}

func isMain(rt ec2types.RouteTable) bool {
	for _, a := range rt.Associations {
		if aws.ToBool(a.Main) {
			return true
		}
	}
	return false
}

func removeRouteTable(ctx context.Context, c *ec2.Client, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	out, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{r.ID}})
	if err != nil {
		return classify(err, deleted)
	}
	for _, rt := range out.RouteTables {
		for _, a := range rt.Associations {
			if aws.ToBool(a.Main) || a.RouteTableAssociationId == nil {
				continue
			}
			_, err := c.DisassociateRouteTable(ctx, &ec2.DisassociateRouteTableInput{AssociationId: a.RouteTableAssociationId})
			if res, ok := step(err); !ok {
				return res
			}
		}
	}
	_, err = c.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(r.ID)})
	return classify(err, deleted)
}
