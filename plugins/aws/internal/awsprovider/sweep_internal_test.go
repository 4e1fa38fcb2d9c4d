package awsprovider

import (
	"context"
	"strings"
	"testing"
	"time"

	kropsconfig "github.com/kropsdev/krops/tools/kit/config"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// scopeOf is what a host sends Sweep: everything Discover found.
func scopeOf(tb testing.TB, ctx context.Context, p *Provider) []sdk.Resource {
	tb.Helper()
	var scope []sdk.Resource
	if err := p.Discover(ctx, func(e sdk.DiscoverEvent) error {
		if e.Resource != nil {
			scope = append(scope, *e.Resource)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return scope
}

func sweepWith(t *testing.T, ctx context.Context, p *Provider) map[string]sdk.SweepEvent {
	t.Helper()
	scope := scopeOf(t, ctx, p)
	final := map[string]sdk.SweepEvent{}
	err := p.Sweep(ctx, sdk.SweepRequest{Scope: scope, MaxIdlePasses: 2}, func(e sdk.SweepEvent) error {
		final[e.Resource.Kind+" "+e.Resource.ID] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return final
}

func configured(t *testing.T, o Options) *Provider {
	p := New("test", o)
	if err := p.Configure(context.Background(), sdk.Config{Environment: "aws", Raw: awstest.ProviderConfig(t, hostJSON)}); err != nil {
		t.Fatal(err)
	}
	return p
}

// A resource that cannot be deleted leaves its dependants behind, and each
// is reported with the reason.
func TestFailedDependencyIsReportedForDependants(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	awstest.Build(t, m.URL, awstest.Options{})
	proxy := testenv.NewFaultProxy(t, m.URL)
	proxy.Add(testenv.Rule{Action: "DeleteNatGateway", Status: 403, Code: "UnauthorizedOperation"})
	t.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	final := sweepWith(t, context.Background(), configured(t, Options{}))
	failed, deletedN := 0, 0
	for id, e := range final {
		switch e.State {
		case sdk.SweepFailed:
			failed++
			if strings.HasPrefix(id, "vpc ") && !strings.Contains(e.Message, "could not be deleted") {
				t.Errorf("%s: %q should name the dependency that failed", id, e.Message)
			}
		case sdk.SweepDeleted:
			deletedN++
		default:
			t.Errorf("%s ended %s: every resource must end deleted or failed", id, e.State)
		}
	}
	// 3 NAT gateways, their 3 subnets, 3 IGWs (wait for NATs), 3 VPCs, 3 EIPs held by NATs.
	if failed != 15 || deletedN == 0 {
		t.Errorf("%d failed, %d deleted", failed, deletedN)
	}
}

// A deletion that never finishes does not hold the sweep past its deadline.
func TestSweepReportsWhatIsLeftBeforeItsDeadline(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	awstest.Build(t, m.URL, awstest.Options{})
	proxy := testenv.NewFaultProxy(t, m.URL)
	addSlowDeletes(proxy, 1_000_000, 0)
	t.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	final := sweepWith(t, ctx, configured(t, Options{PollInterval: 200 * time.Millisecond}))
	if time.Since(start) > 8*time.Second {
		t.Errorf("the sweep ran past its deadline: %v", time.Since(start))
	}
	e, ok := final["nat-gateway "+firstID(final, "nat-gateway")]
	if !ok || e.State != sdk.SweepFailed || !strings.Contains(e.Message, "time ran out") {
		t.Errorf("a NAT gateway stuck deleting: %+v", e)
	}
}

func firstID(final map[string]sdk.SweepEvent, kind string) string {
	for k := range final {
		if id, ok := strings.CutPrefix(k, kind+" "); ok {
			return id
		}
	}
	return ""
}

// hostJSON is what krops binaries send the aws plugin for the file at path:
// the host's own configuration loader, so these tests see that contract.
func hostJSON(path string) ([]byte, error) {
	c, err := kropsconfig.Load(kropsconfig.LoadOptions{Path: path})
	if err != nil {
		return nil, err
	}
	return c.ProviderJSON("aws")
}
