package awsprovider

import (
	"context"
	"fmt"
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

// stackMembers are the IAM resources the configured CloudFormation stack
// holds, by CloudFormation type, physical id to logical id. Membership is
// evidence: the stack is ours by its exact configured name, and whatever it
// created is ours with it. A member is deleted directly only after the
// stack's own deletion has run (it waits on the stack), so it is swept when
// the stack's deletion left it behind, which moto does with roles whose
// policies it did not detach first, and AWS with a stack that failed to
// delete or retained resources.
type stackMembers map[string]map[string]string

// CloudFormation types whose members the IAM scan claims.
const (
	cfnIAMRole            = "AWS::IAM::Role"
	cfnIAMManagedPolicy   = "AWS::IAM::ManagedPolicy"
	cfnIAMInstanceProfile = "AWS::IAM::InstanceProfile"
)

// scanStackMembers lists the stack's resources; none when no stack is
// configured or it does not exist (it was never created, or its deletion
// completed).
func (p *Provider) scanStackMembers(ctx context.Context) (stackMembers, error) {
	members := stackMembers{}
	if p.s.cfnStack == "" {
		return members, nil
	}
	c, err := p.c.cfn(ctx, p.s.mgmt().Region)
	if err != nil {
		return nil, err
	}
	pages := cloudformation.NewListStackResourcesPaginator(c, &cloudformation.ListStackResourcesInput{StackName: aws.String(p.s.cfnStack)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if apiCode(err) == "ValidationError" && strings.Contains(err.Error(), "does not exist") {
			return stackMembers{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cloudformation ListStackResources %s: %w", p.s.cfnStack, err)
		}
		for _, r := range page.StackResourceSummaries {
			typ, id := aws.ToString(r.ResourceType), aws.ToString(r.PhysicalResourceId)
			if id == "" || r.ResourceStatus == cfntypes.ResourceStatusDeleteComplete {
				continue
			}
			if members[typ] == nil {
				members[typ] = map[string]string{}
			}
			members[typ][id] = aws.ToString(r.LogicalResourceId)
		}
	}
	return members, nil
}

// member reports whether the stack holds id as typ, with the evidence to
// show for it and the stack to wait on.
func (p *Provider) member(m stackMembers, typ, id string) (evidence, after string, ok bool) {
	logical, ok := m[typ][id]
	if !ok {
		return "", "", false
	}
	return fmt.Sprintf("%s (%s) of CloudFormation stack %s, the exact name bootstrap.toml [providers.aws.teardown] cfn-stack-name gives", logical, typ, p.s.cfnStack),
		KindCFNStack + "/" + p.s.cfnStack, true
}
