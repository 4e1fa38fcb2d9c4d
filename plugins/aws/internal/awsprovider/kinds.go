package awsprovider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// kind is one resource kind the provider may own. Each kind's file declares
// it: how it is found and the evidence that makes it krops's, what must be
// gone before it, and how it is deleted; then it registers it. Discovery
// and the sweep only iterate the registry, so a new kind is one new file.
type kind struct {
	name string
	// scanTarget lists the kind for one target (a cluster in its region).
	scanTarget func(p *Provider, ctx context.Context, t Target, e *emitter)
	// scanAccount lists the kind once per account.
	scanAccount func(p *Provider, ctx context.Context, account string, e *emitter)
	// inVPC lists the kind inside one of a target's VPCs (vpc.go runs it);
	// deps then names what in the same VPC must be gone first. The VPC
	// itself waits for everything listed inside it.
	inVPC func(ctx context.Context, c *ec2.Client, vpcID string) ([]vpcItem, error)
	deps  func(it vpcItem, vpc []vpcItem) []string
	// remove takes one step towards deleting r (see sweep.DeleteFunc).
	remove func(ctx context.Context, p *Provider, r sdk.Resource, a sweep.Attempt) sweep.Result
}

// vpcItem is one resource listed inside a VPC, with the links its kind's
// deps and the Elastic IP scan read.
type vpcItem struct {
	res sdk.Resource
	// subnet and eips: a NAT gateway's subnet and allocation ids.
	subnet string
	eips   []string
}

// registry holds every kind, filled at init by the kinds' files and read
// only afterwards; order is registration order (files in name order), so
// discovery is deterministic in sequential mode.
var (
	registry      = map[string]kind{}
	registryOrder []kind
)

func register(k kind) {
	if _, dup := registry[k.name]; dup {
		panic("aws provider: kind " + k.name + " registered twice")
	}
	registry[k.name] = k
	registryOrder = append(registryOrder, k)
}

// deleteOne takes one step towards deleting r, by its kind's remove.
func (p *Provider) deleteOne(ctx context.Context, r sdk.Resource, a sweep.Attempt) sweep.Result {
	k, ok := registry[r.Kind]
	if !ok || k.remove == nil {
		return result(sweep.Failed, "the aws provider does not delete kind "+r.Kind)
	}
	return k.remove(ctx, p, r, a)
}

// failedClient is the outcome when a client for r's region cannot be made.
func failedClient(err error) sweep.Result { return result(sweep.Failed, err.Error()) }
