package awsprovider

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindIAMPolicy is a customer-managed policy tagged as owned by a target
// (listed by iam.go's scan).
const KindIAMPolicy = "iam-policy"

func init() {
	register(kind{name: KindIAMPolicy, remove: removeIAMPolicy})
}

func removeIAMPolicy(ctx context.Context, p *Provider, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	c, err := p.c.iam(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	return deletePolicy(ctx, c, r.ID)
}

// deletePolicy deletes a policy of ours once nothing uses it. It never
// detaches a policy from a role, user or group that is not in the sweep:
// that would change someone else's permissions.
func deletePolicy(ctx context.Context, c *iam.Client, arn string) sweep.Result {
	policy := aws.String(arn)
	var users []string
	ep := iam.NewListEntitiesForPolicyPaginator(c, &iam.ListEntitiesForPolicyInput{PolicyArn: policy})
	for ep.HasMorePages() {
		page, err := ep.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, r := range page.PolicyRoles {
			users = append(users, "role "+aws.ToString(r.RoleName))
		}
		for _, u := range page.PolicyUsers {
			users = append(users, "user "+aws.ToString(u.UserName))
		}
		for _, g := range page.PolicyGroups {
			users = append(users, "group "+aws.ToString(g.GroupName))
		}
	}
	if len(users) > 0 {
		return result(sweep.Failed, "still attached to "+strings.Join(users, ", ")+", which this sweep does not own: detach it there, then rerun")
	}
	versions := iam.NewListPolicyVersionsPaginator(c, &iam.ListPolicyVersionsInput{PolicyArn: policy})
	for versions.HasMorePages() {
		page, err := versions.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, v := range page.Versions {
			if v.IsDefaultVersion {
				continue
			}
			_, err := c.DeletePolicyVersion(ctx, &iam.DeletePolicyVersionInput{PolicyArn: policy, VersionId: v.VersionId})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	_, err := c.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: policy})
	return classify(err, deleted)
}
