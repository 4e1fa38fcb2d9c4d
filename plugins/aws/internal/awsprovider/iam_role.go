package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindIAMRole is a role that is ours by evidence (an exact name the
// configuration or CAPA's naming derives, or an ownership tag). The four IAM
// kinds are listed together by iam.go's scan, because their evidence is
// entangled: a profile is ours because it carries one of our roles, a
// policy goes after the roles and users it is attached to.
const KindIAMRole = "iam-role"

func init() {
	register(kind{name: KindIAMRole, scanAccount: func(p *Provider, ctx context.Context, _ string, e *emitter) { p.scanIAM(ctx, e) }, remove: removeIAMRole})
}

func removeIAMRole(ctx context.Context, p *Provider, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	c, err := p.c.iam(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	return deleteRole(ctx, c, r.ID)
}

func deleteRole(ctx context.Context, c *iam.Client, role string) sweep.Result {
	name := aws.String(role)
	attached := iam.NewListAttachedRolePoliciesPaginator(c, &iam.ListAttachedRolePoliciesInput{RoleName: name})
	for attached.HasMorePages() {
		page, err := attached.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, pol := range page.AttachedPolicies {
			_, err := c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: name, PolicyArn: pol.PolicyArn})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	inline := iam.NewListRolePoliciesPaginator(c, &iam.ListRolePoliciesInput{RoleName: name})
	for inline.HasMorePages() {
		page, err := inline.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, pol := range page.PolicyNames {
			_, err := c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: name, PolicyName: aws.String(pol)})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	// Profiles in scope were emptied and deleted before the role; one that
	// appeared since only loses the role, since nothing says it is ours.
	profiles := iam.NewListInstanceProfilesForRolePaginator(c, &iam.ListInstanceProfilesForRoleInput{RoleName: name})
	for profiles.HasMorePages() {
		page, err := profiles.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, ip := range page.InstanceProfiles {
			_, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{RoleName: name, InstanceProfileName: ip.InstanceProfileName})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	_, err := c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: name})
	return classify(err, deleted)
}
