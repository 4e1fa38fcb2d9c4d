package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	kropsconfig "github.com/kropsdev/krops/tools/kit/config"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// load starts the real plugin subprocess and configures it for the aws
// environment against endpoint (moto, or a fault proxy in front of it).
func load(t *testing.T, m *testenv.MotoServer, endpoint string, raw []byte) *sdk.Client {
	t.Helper()
	c, err := sdk.Load(context.Background(), "aws", sdk.LoadOptions{Path: sdktest.Build(t, ".", "aws"), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env := m.Env()
	env["AWS_ENDPOINT_URL"] = endpoint
	env["KROPS_AWS_POLL_INTERVAL"] = os.Getenv("KROPS_AWS_POLL_INTERVAL")
	if err := c.Configure(context.Background(), sdk.Config{Environment: "aws", Raw: raw}, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok && v != ""
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

type discovered struct {
	scope     *sdk.Scope
	resources []sdk.Resource
	suspects  []sdk.Resource
	errors    []sdk.QueryError
}

func discover(t *testing.T, c *sdk.Client) discovered {
	t.Helper()
	var d discovered
	err := c.Discover(context.Background(), func(e sdk.DiscoverEvent) error {
		switch {
		case e.Scope != nil:
			d.scope = e.Scope
		case e.Resource != nil:
			d.resources = append(d.resources, *e.Resource)
		case e.Suspect != nil:
			d.suspects = append(d.suspects, *e.Suspect)
		case e.Error != nil:
			d.errors = append(d.errors, *e.Error)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (d discovered) byName() map[string]sdk.Resource {
	out := map[string]sdk.Resource{}
	for _, r := range d.resources {
		out[r.Kind+" "+r.ID] = r
	}
	return out
}

func (d discovered) suspectSet() []string {
	var out []string
	for _, r := range d.suspects {
		out = append(out, r.Kind+" "+r.ID)
	}
	sort.Strings(out)
	return out
}

func (d discovered) set() []string {
	var out []string
	for _, r := range d.resources {
		out = append(out, r.Kind+" "+r.ID)
	}
	sort.Strings(out)
	return out
}

// One moto server and footprint serve every subtest: discovery and
// preflight only read.
func TestAgainstMoto(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	fp := awstest.Build(t, m.URL, awstest.Options{ObjectVersions: 8})

	t.Run("discover finds exactly the krops set", func(t *testing.T) {
		proxy := testenv.NewFaultProxy(t, m.URL)
		d := discover(t, load(t, m, proxy.URL, awstest.ProviderConfig(t, hostJSON)))
		if len(d.errors) > 0 {
			t.Fatalf("query errors: %+v", d.errors)
		}
		if got, want := strings.Join(d.set(), "\n"), strings.Join(fp.Sorted(), "\n"); got != want {
			t.Errorf("discovered:\n%s\nwant:\n%s", got, want)
		}
		for _, decoy := range fp.Decoys {
			for _, r := range d.set() {
				if r == decoy {
					t.Errorf("decoy %s was discovered", decoy)
				}
			}
		}
		if d.scope == nil || d.scope.Account != awstest.Account || strings.Join(d.scope.Regions, ",") != "eu-north-1,eu-west-1" {
			t.Errorf("scope %+v", d.scope)
		}
		proxy.AssertNoMutation(t)
		got := d.byName()
		for _, tc := range []struct{ resource, evidence string }{
			{"eks-cluster default_eu-north-1-management-control-plane", "bootstrap.toml environments.aws.teardown.mgmt-eks-cluster-name"},
			{"eks-cluster default_eu-west-1-workload-control-plane", "bootstrap.toml environments.aws.teardown.aws-workloads[1].eks-cluster-name"},
			{"rds-instance krops-eu-north-1-workload-db", "bootstrap.toml environments.aws.teardown.aws-workloads[0].rds-instance"},
			{"iam-role eu-north-1-management-iam-service-role", "tag kubernetes.io/cluster/eu-north-1-management=owned"},
			{"iam-role eu-west-1-workload-iam-service-role", "exact name eu-west-1-workload-iam-service-role: CAPA's EKS control-plane role of cluster eu-west-1-workload"},
			{"iam-role capa-ng-7f3e2a9c", "tag kubernetes.io/cluster/eu-west-1-workload=owned"},
			{"iam-instance-profile capa-ng-7f3e2a9c", "carries role capa-ng-7f3e2a9c"},
		} {
			if r, ok := got[tc.resource]; !ok || !strings.Contains(strings.Join(r.Evidence, "; "), tc.evidence) {
				t.Errorf("%s: evidence %q, want it to name %q", tc.resource, r.Evidence, tc.evidence)
			}
		}
		if r := got["iam-role capa-ng-7f3e2a9c"]; !slices.Contains(r.DependsOn, "iam-instance-profile/capa-ng-7f3e2a9c") {
			t.Errorf("a role must wait for its instance profile: %v", r.DependsOn)
		}
		for _, r := range d.resources {
			if len(r.Evidence) == 0 {
				t.Errorf("%s %s carries no evidence of ownership", r.Kind, r.ID)
			}
			if r.Kind == "vpc" && !contains(r.DependsOn, "subnet") {
				t.Errorf("vpc %s must wait for its subnets: %v", r.ID, r.DependsOn)
			}
		}
	})

	t.Run("names that share a target's prefix without evidence are suspects, never ours", func(t *testing.T) {
		d := discover(t, load(t, m, m.URL, awstest.ProviderConfig(t, hostJSON)))
		want := append([]string(nil), fp.Suspects...)
		sort.Strings(want)
		if got := d.suspectSet(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("suspects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, s := range d.suspects {
			if !strings.Contains(strings.Join(s.Evidence, " "), "not ours by evidence") {
				t.Errorf("suspect %s %s must say why it is not ours: %v", s.Kind, s.ID, s.Evidence)
			}
		}
		blue := "tagged"
		for _, s := range d.suspects {
			if s.ID == "eu-north-1-workload-blue-iam-service-role" {
				blue = strings.Join(s.Evidence, " ")
			}
		}
		if !strings.Contains(blue, "cluster eu-north-1-workload-blue owns it") {
			t.Errorf("a prefix collision with another cluster's tag must name that cluster: %q", blue)
		}
	})

	t.Run("a tag that names a cluster of another environment is never reported", func(t *testing.T) {
		d := discover(t, load(t, m, m.URL, awstest.ProviderConfig(t, hostJSON)))
		for _, set := range [][]string{d.set(), d.suspectSet()} {
			for _, r := range set {
				if strings.Contains(r, "staging-eu-north-1-workload") || strings.Contains(r, "unrelated") {
					t.Errorf("%s is not ours and looks nothing like ours, yet was reported", r)
				}
			}
		}
	})

	t.Run("an unreachable endpoint is an unknown state, reported at once", func(t *testing.T) {
		dead := "http://127.0.0.1:1" // nothing listens on port 1
		c := load(t, m, dead, awstest.ProviderConfig(t, hostJSON))
		err := c.Discover(context.Background(), func(sdk.DiscoverEvent) error { return nil })
		if !errors.Is(err, sdk.ErrUnknownState) || !strings.Contains(err.Error(), "could not reach the AWS endpoint "+dead+" (sts GetCallerIdentity): connection refused") {
			t.Fatalf("err = %v, want an unknown state naming the endpoint and the account lookup", err)
		}
		// An endpoint that keeps failing gets 3 attempts, not the 10 a
		// listing gets, so the user hears at once.
		proxy := testenv.NewFaultProxy(t, m.URL)
		proxy.Add(testenv.Rule{Action: "GetCallerIdentity", Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable"})
		err = load(t, m, proxy.URL, awstest.ProviderConfig(t, hostJSON)).Discover(context.Background(), func(sdk.DiscoverEvent) error { return nil })
		if !errors.Is(err, sdk.ErrUnknownState) {
			t.Errorf("err = %v", err)
		}
		if got := strings.Join(proxy.Actions(), ","); got != "GetCallerIdentity,GetCallerIdentity,GetCallerIdentity" {
			t.Errorf("calls: %s; want three identity attempts and nothing else", got)
		}
	})

	t.Run("a failing query is reported and the rest still returned", func(t *testing.T) {
		proxy := testenv.NewFaultProxy(t, m.URL)
		proxy.Add(testenv.Rule{Action: "DescribeNatGateways", Status: http.StatusForbidden, Code: "UnauthorizedOperation"})
		d := discover(t, load(t, m, proxy.URL, awstest.ProviderConfig(t, hostJSON)))
		regions := map[string]bool{}
		for _, e := range d.errors {
			if e.Kind != "nat-gateway" {
				t.Errorf("unexpected error %+v", e)
			}
			regions[e.Region] = true
		}
		if !regions["eu-north-1"] || !regions["eu-west-1"] {
			t.Errorf("the NAT gateway failure must be reported per region: %+v", d.errors)
		}
		got := strings.Join(d.set(), "\n")
		for _, want := range fp.Sorted() {
			if strings.HasPrefix(want, "nat-gateway ") {
				if strings.Contains(got, want) {
					t.Errorf("%s reported although its query failed", want)
				}
				continue
			}
			if !strings.Contains(got, want) {
				t.Errorf("%s missing: one failing type must not hide the others", want)
			}
		}
	})

	t.Run("preflight quotas", func(t *testing.T) {
		cases := []struct {
			name        string
			eipQuota    map[string]int
			wantShort   []string
			wantDesired map[string]int
		}{
			// eu-north-1: 2 clusters need 6; 5 EIPs allocated, 4 of them ours, 1 foreign.
			// eu-west-1: 1 cluster needs 3; 2 allocated, both ours.
			{"rerun after a partial run passes: our own EIPs count as available", map[string]int{"eu-north-1": 7, "eu-west-1": 3}, nil, nil},
			{"a foreign EIP makes a region short", map[string]int{"eu-north-1": 6, "eu-west-1": 3}, []string{"eu-north-1"}, map[string]int{"eu-north-1": 7}},
			{"all short regions are reported together", map[string]int{"eu-north-1": 5, "eu-west-1": 2}, []string{"eu-north-1", "eu-west-1"}, map[string]int{"eu-north-1": 7, "eu-west-1": 3}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				proxy := testenv.NewFaultProxy(t, m.URL)
				proxy.Add(testenv.Rule{Action: "GetServiceQuota", Respond: eipQuotaStandIn(t, m.URL, tc.eipQuota)})
				checks, err := load(t, m, proxy.URL, awstest.ProviderConfig(t, hostJSON)).Preflight(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				short := map[string]sdk.Check{}
				for _, c := range checks {
					if !c.OK {
						short[c.Name] = c
					}
				}
				if len(short) != len(tc.wantShort) {
					t.Errorf("failed checks %+v, want short %v", short, tc.wantShort)
				}
				for _, region := range tc.wantShort {
					c, ok := short["Elastic IPs in "+region]
					want := fmt.Sprintf("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-0263D0A3 --desired-value %d --region %s", tc.wantDesired[region], region)
					if !ok || c.Remedy != want {
						t.Errorf("%s: check %+v, want remedy %q", region, c, want)
					}
				}
				proxy.AssertNoMutation(t)
			})
		}
	})

	t.Run("an account outside the allow-list is refused before any listing", func(t *testing.T) {
		proxy := testenv.NewFaultProxy(t, m.URL)
		raw := awstest.ProviderConfig(t, hostJSON, `allowed-accounts = ["999999999999"]`)
		c := load(t, m, proxy.URL, raw)
		err := c.Discover(context.Background(), func(sdk.DiscoverEvent) error { return nil })
		if !errors.Is(err, sdk.ErrRefused) || !strings.Contains(err.Error(), "AWS account 123456789012 is not in environments.aws.allowed-accounts [999999999999]") ||
			strings.Contains(err.Error(), "refused: refused") {
			t.Fatalf("err = %v", err)
		}
		if got := strings.Join(proxy.Actions(), ","); got != "GetCallerIdentity" {
			t.Errorf("calls before refusing: %s (only the identity check may run)", got)
		}
		checks, err := c.Preflight(context.Background())
		if err != nil || len(checks) != 1 || checks[0].OK {
			t.Errorf("preflight %+v %v", checks, err)
		}
	})
}

// The conformance suite re-runs this test as a host process, so it gets a
// moto of its own rather than TestAgainstMoto's footprint.
func TestConformance(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	sdkconformance.Run(t, sdktest.Build(t, ".", "aws"), sdkconformance.Options{Config: sdk.Config{Raw: awstest.ProviderConfig(t, hostJSON)}, Env: m.Env()})
}

func contains(ids []string, prefix string) bool {
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	return false
}

var scopeRegion = regexp.MustCompile(`Credential=[^/]+/[0-9]+/([^/]+)/`)

// eipQuotaStandIn is a STAND-IN for Service Quotas' EC2 Elastic IP quota
// (L-0263D0A3), which moto does not serve; every other quota request goes
// on to moto.
func eipQuotaStandIn(t *testing.T, motoURL string, perRegion map[string]int) http.HandlerFunc {
	target, _ := url.Parse(motoURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ ServiceCode, QuotaCode string }
		_ = json.Unmarshal(body, &in)
		if in.QuotaCode != "L-0263D0A3" {
			rp.ServeHTTP(w, r)
			return
		}
		region := ""
		if m := scopeRegion.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			region = m[1]
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		fmt.Fprintf(w, `{"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "QuotaName": "EC2-VPC Elastic IPs", "Value": %d}}`, perRegion[region])
	}
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
