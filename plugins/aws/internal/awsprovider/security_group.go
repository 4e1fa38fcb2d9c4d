package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindSecurityGroup is a security group of one of our VPCs other than its
// default one, which goes with the VPC.
const KindSecurityGroup = "security-group"

func init() {
	register(kind{name: KindSecurityGroup, inVPC: listSecurityGroups, remove: withEC2(removeSecurityGroup)})
}

func listSecurityGroups(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error) {
	all, err := everyPage(ctx, ec2.NewDescribeSecurityGroupsPaginator(c, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("vpc-id", vpcID)}}),
		func(o *ec2.DescribeSecurityGroupsOutput) []ec2types.SecurityGroup { return o.SecurityGroups })
	var out []vpcItem
	for _, g := range all {
		if aws.ToString(g.GroupName) != "default" {
			out = append(out, itemIn(vpcID, KindSecurityGroup, aws.ToString(g.GroupId), g.Tags))
		}
	}
	return out, err
}

// removeSecurityGroup deletes the group. Most delete at once, with their
// rules. A group still referenced answers DependencyViolation; from the
// second try on, its own rules are revoked first, which breaks reference
// cycles between groups (each side drops its rule, then both delete).
func removeSecurityGroup(ctx context.Context, c *ec2.Client, r sdk.Resource, a sweep.Attempt) sweep.Result {
	id := aws.String(r.ID)
	if a.N <= 1 {
		_, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
		return classify(err, deleted)
	}
	out, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{r.ID}})
	if err != nil {
		return classify(err, deleted)
	}
	for _, g := range out.SecurityGroups {
		if len(g.IpPermissions) > 0 {
			_, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: id, IpPermissions: g.IpPermissions})
			if res, ok := step(err); !ok {
				return res
			}
		}
		if len(g.IpPermissionsEgress) > 0 {
			_, err := c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: id, IpPermissions: g.IpPermissionsEgress})
			if res, ok := step(err); !ok {
				return res
			}
		}
	}
	_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: id})
	return classify(err, deleted)
}
