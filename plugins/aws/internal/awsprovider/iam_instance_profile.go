package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindIAMInstanceProfile is a profile carrying one of our roles (listed by
// iam.go's scan); the role waits for it.
const KindIAMInstanceProfile = "iam-instance-profile"

func init() {
	register(kind{name: KindIAMInstanceProfile, remove: removeIAMInstanceProfile})
}

func removeIAMInstanceProfile(ctx context.Context, p *Provider, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	c, err := p.c.iam(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	return deleteInstanceProfile(ctx, c, r.ID)
}

func deleteInstanceProfile(ctx context.Context, c *iam.Client, profile string) sweep.Result {
	name := aws.String(profile)
	out, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	if err != nil {
		return classify(err, deleted)
	}
	for _, r := range out.InstanceProfile.Roles {
		_, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: r.RoleName})
		if a, ok := step(err); !ok {
			return a
		}
	}
	_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name})
	return classify(err, deleted)
}
