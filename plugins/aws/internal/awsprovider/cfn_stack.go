package awsprovider

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// KindCFNStack is the CAPA bootstrap stack [providers.aws.teardown] cfn-stack-name names.
const KindCFNStack = "cloudformation-stack"

func init() {
	register(kind{name: KindCFNStack, scanAccount: func(p *Provider, ctx context.Context, _ string, e *emitter) { p.scanStack(ctx, e) }, remove: removeCFNStack})
}

// scanStack looks up the CAPA bootstrap CloudFormation stack in the
// management region, where `clusterawsadm bootstrap iam` creates it.
func (p *Provider) scanStack(ctx context.Context, e *emitter) {
	if p.s.cfnStack == "" {
		return
	}
	region := p.s.mgmt().Region
	c, err := p.c.cfn(ctx, region)
	if err != nil {
		e.failed(KindCFNStack, region, err)
		return
	}
	out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(p.s.cfnStack)})
	if apiCode(err) == "ValidationError" && strings.Contains(err.Error(), "does not exist") {
		return
	}
	if err != nil {
		e.failed(KindCFNStack, region, err)
		return
	}
	for _, st := range out.Stacks {
		if st.StackStatus == cfntypes.StackStatusDeleteComplete {
			continue
		}
		tags := map[string]string{}
		for _, tg := range st.Tags {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		created := st.CreationTime
		if created != nil {
			c := created.UTC().Truncate(time.Second)
			created = &c
		}
		e.resource(sdk.Resource{Kind: KindCFNStack, ID: aws.ToString(st.StackName), Region: region, CreatedAt: created, Tags: tags,
			Evidence: []string{"exact name from bootstrap.toml [providers.aws.teardown] cfn-stack-name"}})
	}
}

func removeCFNStack(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result {
	c, err := p.c.cfn(ctx, p.regionOf(r))
	if err != nil {
		return failedClient(err)
	}
	stack, started := r.ID, a.Polling
	if started {
		out, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
		if err != nil {
			return classify(err, deleted)
		}
		if len(out.Stacks) == 0 {
			return deleted
		}
		switch st := out.Stacks[0].StackStatus; st {
		case cfntypes.StackStatusDeleteComplete:
			return deleted
		case cfntypes.StackStatusDeleteFailed:
			return result(sweep.Failed, "stack deletion failed: "+aws.ToString(out.Stacks[0].StackStatusReason))
		default:
			return result(sweep.InProgress, "stack "+string(st))
		}
	}
	_, err = c.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stack)})
	return classify(err, result(sweep.InProgress, "deletion accepted"))
}
