package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindIAMUser is a user [teardown] global-iam-users names exactly (listed
// by iam.go's scan).
const KindIAMUser = "iam-user"

func init() {
	register(kind{name: KindIAMUser, remove: removeIAMUser})
}

func removeIAMUser(ctx context.Context, p *Provider, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	c, err := p.c.iam(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	return deleteUser(ctx, c, r.ID)
}

func deleteUser(ctx context.Context, c *iam.Client, user string) sweep.Result {
	name := aws.String(user)
	_, err := c.DeleteLoginProfile(ctx, &iam.DeleteLoginProfileInput{UserName: name})
	if a, ok := step(err); !ok {
		return a
	}
	keys := iam.NewListAccessKeysPaginator(c, &iam.ListAccessKeysInput{UserName: name})
	for keys.HasMorePages() {
		page, err := keys.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, k := range page.AccessKeyMetadata {
			_, err := c.DeleteAccessKey(ctx, &iam.DeleteAccessKeyInput{UserName: name, AccessKeyId: k.AccessKeyId})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	inline := iam.NewListUserPoliciesPaginator(c, &iam.ListUserPoliciesInput{UserName: name})
	for inline.HasMorePages() {
		page, err := inline.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, pol := range page.PolicyNames {
			_, err := c.DeleteUserPolicy(ctx, &iam.DeleteUserPolicyInput{UserName: name, PolicyName: aws.String(pol)})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	attached := iam.NewListAttachedUserPoliciesPaginator(c, &iam.ListAttachedUserPoliciesInput{UserName: name})
	for attached.HasMorePages() {
		page, err := attached.NextPage(ctx)
		if err != nil {
			return classify(err, deleted)
		}
		for _, pol := range page.AttachedPolicies {
			_, err := c.DetachUserPolicy(ctx, &iam.DetachUserPolicyInput{UserName: name, PolicyArn: pol.PolicyArn})
			if a, ok := step(err); !ok {
				return a
			}
		}
	}
	_, err = c.DeleteUser(ctx, &iam.DeleteUserInput{UserName: name})
	return classify(err, deleted)
}
