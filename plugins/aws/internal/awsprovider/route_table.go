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
	register(kind{name: KindRouteTable, inVPC: listRouteTables, remove: removeRouteTable})
}

func listRouteTables(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	var out []vpcItem
	pages := ec2.NewDescribeRouteTablesPaginator(c, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{filter("vpc-id", vpcID)}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, rt := range page.RouteTables {
			if !isMain(rt) {
				out = append(out, itemIn(vpcID, KindRouteTable, aws.ToString(rt.RouteTableId), rt.Tags))
			}
		}
	}
	return out, nil
}

func isMain(rt ec2types.RouteTable) bool {
	for _, a := range rt.Associations {
		if aws.ToBool(a.Main) {
			return true
		}
	}
	return false
}

func removeRouteTable(ctx context.Context, p *Provider, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	c, err := p.c.ec2(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
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
