package main_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

type swept struct {
	events []sdk.SweepEvent
}

func (s swept) final() map[string]sdk.SweepState {
	out := map[string]sdk.SweepState{}
	for _, e := range s.events {
		out[e.Resource.Kind+" "+e.Resource.ID] = e.State
	}
	return out
}

func sweep(t *testing.T, c *sdk.Client, scope []sdk.Resource, dryRun bool) swept {
	t.Helper()
	var s swept
	err := c.Sweep(context.Background(), sdk.SweepRequest{DryRun: dryRun, Scope: scope, MaxIdlePasses: 3}, func(e sdk.SweepEvent) error {
		s.events = append(s.events, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loadSweeper is load with no wait between passes: moto finishes
// asynchronous deletions at once.
func loadSweeper(t *testing.T, m *testenv.MotoServer, endpoint string) *sdk.Client {
	t.Setenv("KROPS_AWS_POLL_INTERVAL", "0")
	return load(t, m, endpoint, awstest.ProviderConfig(t, hostJSON))
}

func TestSweepAgainstMoto(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	fp := awstest.Build(t, m.URL, awstest.Options{ObjectVersions: 5, BigBucketVersions: 1300, StackIAM: true})
	proxy := testenv.NewFaultProxy(t, m.URL)
	c := loadSweeper(t, m, proxy.URL)
	before := discover(t, c)

	// Dry run: the plan in deletion order, and no mutating call at all.
	plan := sweep(t, c, before.resources, true)
	proxy.AssertNoMutation(t)
	pos := map[string]int{}
	for i, e := range plan.events {
		if e.State != sdk.SweepPlanned {
			t.Fatalf("dry run emitted %s for %s", e.State, e.Resource.ID)
		}
		pos[e.Resource.ID] = i
	}
	for _, e := range plan.events {
		for _, dep := range e.Resource.DependsOn {
			if pos[dep] > pos[e.Resource.ID] {
				t.Errorf("plan puts %s before its dependency %s", e.Resource.ID, dep)
			}
		}
	}
	if len(plan.events) != len(fp.Owned) {
		t.Errorf("plan has %d steps for %d resources", len(plan.events), len(fp.Owned))
	}
	if after := discover(t, c); strings.Join(after.set(), ",") != strings.Join(before.set(), ",") {
		t.Fatal("the dry run changed the cloud")
	}

	// The sweep removes exactly the krops set. One security group is
	// refused once as still in use (moto never does that), so the retry
	// path revokes its rules before deleting it again.
	proxy.Add(testenv.Rule{Action: "DeleteSecurityGroup", Times: 1, Status: 400, Code: "DependencyViolation"})
	res := sweep(t, c, before.resources, false)
	for id, st := range res.final() {
		if st != sdk.SweepDeleted {
			t.Errorf("%s ended %s", id, st)
		}
	}
	if left := discover(t, c); len(left.resources) != 0 || len(left.errors) != 0 {
		t.Errorf("left after the sweep: %v %v", left.set(), left.errors)
	}
	assertDecoysSurvive(t, m.URL, fp)
	assertDeletionOrder(t, proxy, before.resources)
	revokes := 0
	for _, r := range proxy.Requests() {
		if r.Action == "RevokeSecurityGroupIngress" || r.Action == "RevokeSecurityGroupEgress" {
			revokes++
		}
	}
	progress := 0
	for _, e := range res.events {
		if e.State == sdk.SweepDeleting && strings.Contains(e.Message, "deleted so far") {
			progress++
		}
	}
	if progress < 2 {
		t.Errorf("a 1300-version bucket must report progress per 1000-key batch, got %d events", progress)
	}
	if revokes == 0 {
		t.Error("the group refused as in use was not retried with its rules revoked")
	}

	// A second sweep of the same scope is a no-op.
	proxy2 := testenv.NewFaultProxy(t, m.URL)
	again := sweep(t, loadSweeper(t, m, proxy2.URL), before.resources, false)
	for id, st := range again.final() {
		if st != sdk.SweepSkipped {
			t.Errorf("second sweep: %s %s", id, st)
		}
	}
	proxy2.AssertNoMutation(t)
}

func TestSweepThroughThrottlingEndsTheSame(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	fp := awstest.Build(t, m.URL, awstest.Options{ObjectVersions: 10})
	proxy := testenv.NewFaultProxy(t, m.URL)
	c := loadSweeper(t, m, proxy.URL)
	scope := discover(t, c).resources
	rule := proxy.Throttle(0.2, "Throttling")
	for id, st := range sweep(t, c, scope, false).final() {
		if st != sdk.SweepDeleted {
			t.Errorf("%s ended %s under throttling", id, st)
		}
	}
	_ = rule
	throttled := 0
	for _, r := range proxy.Requests() {
		if r.Injected != "" {
			throttled++
		}
	}
	if throttled == 0 {
		t.Fatal("no call was throttled: the test proves nothing")
	}
	if left := discover(t, loadSweeper(t, m, m.URL)); len(left.resources) != 0 {
		t.Errorf("left after a throttled sweep (%d calls throttled): %v", throttled, left.set())
	}
	assertDecoysSurvive(t, m.URL, fp)
}

func TestSweepNeverTouchesWhatIsNotInScope(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	fp := awstest.Build(t, m.URL, awstest.Options{})
	proxy := testenv.NewFaultProxy(t, m.URL)
	c := loadSweeper(t, m, proxy.URL)
	// A forged scope: a decoy, every suspect, and one real bucket. The
	// provider re-discovers and deletes only what is ours by evidence.
	scope := []sdk.Resource{
		{Kind: "iam-role", ID: "unrelated-role", Region: "global"},
		{Kind: "s3-bucket", ID: "krops-123456789012-eu-west-1-workload-data", Region: "eu-west-1"},
	}
	scope = append(scope, discover(t, c).suspects...)
	if len(scope) != 2+len(fp.Suspects) {
		t.Fatalf("the forged scope holds %d suspects, want %d", len(scope)-2, len(fp.Suspects))
	}
	res := sweep(t, c, scope, false).final()
	for _, r := range scope {
		want := sdk.SweepSkipped
		if r.Kind == "s3-bucket" {
			want = sdk.SweepDeleted
		}
		if got := res[r.Kind+" "+r.ID]; got != want {
			t.Errorf("%s %s ended %s, want %s", r.Kind, r.ID, got, want)
		}
	}
	for _, r := range proxy.Mutations() {
		for _, p := range []string{"RoleName", "PolicyArn", "InstanceProfileName"} {
			if v := r.Params.Get(p); v != "" {
				t.Errorf("a mutating call touched IAM outside the scope: %s %s=%s", r.Action, p, v)
			}
		}
	}
	assertDecoysSurvive(t, m.URL, fp)
}

// Someone else (a second sweep, CAPA, a person) removes things between
// discovery and deletion: AWS then answers NotFound for the resource or for
// a sub-step of its deletion. Gone is the goal, so each ends deleted, and
// only those are called "already gone".
func TestSweepRemovedBySomeoneElseEndsDeleted(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	fp := awstest.Build(t, m.URL, awstest.Options{})
	proxy := testenv.NewFaultProxy(t, m.URL)
	c := loadSweeper(t, m, proxy.URL)
	scope := discover(t, c).resources
	raced := []testenv.Rule{
		{Action: "DisassociateRouteTable", Times: 1, Respond: proxy.Raced(400, "InvalidAssociationID.NotFound")},
		{Action: "DeleteSubnet", Times: 1, Respond: proxy.Raced(400, "InvalidSubnetID.NotFound")},
		{Action: "RemoveRoleFromInstanceProfile", Times: 1, Respond: proxy.Raced(404, "NoSuchEntity")},
		{Action: "DeletePolicy", Times: 1, Respond: proxy.Raced(404, "NoSuchEntity")},
	}
	for _, r := range raced {
		proxy.Add(r)
	}
	res := sweep(t, c, scope, false)
	for id, st := range res.final() {
		if st != sdk.SweepDeleted {
			t.Errorf("%s ended %s", id, st)
		}
	}
	injected := 0
	for _, r := range proxy.Requests() {
		if r.Injected != "" {
			injected++
		}
	}
	if injected != len(raced) {
		t.Fatalf("%d races injected, want %d: the test proves nothing", injected, len(raced))
	}
	// Exactly the subnet and the policy were found gone at their own
	// deletion; the sub-step races are invisible in the outcome.
	var already []string
	for _, e := range res.events {
		if e.State == sdk.SweepDeleted && strings.HasPrefix(e.Message, "already gone") {
			already = append(already, e.Resource.Kind)
		}
	}
	sort.Strings(already)
	if strings.Join(already, ",") != "iam-policy,subnet" {
		t.Errorf("reported already gone: %v; want the raced subnet and policy only", already)
	}
	if left := discover(t, loadSweeper(t, m, m.URL)); len(left.resources) != 0 {
		t.Errorf("left: %v", left.set())
	}
	assertDecoysSurvive(t, m.URL, fp)
}

// assertDecoysSurvive checks every decoy of the footprint directly.
func assertDecoysSurvive(t *testing.T, endpoint string, fp *awstest.Footprint) {
	t.Helper()
	ctx := context.Background()
	cfg := func(region string) aws.Config {
		c, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region), awsconfig.WithBaseEndpoint(endpoint),
			awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("testing", "testing", "")))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	north := cfg("eu-north-1")
	ec := ec2.NewFromConfig(north)
	for _, d := range fp.Decoys {
		kind, id, _ := strings.Cut(d, " ")
		var err error
		switch kind {
		case "vpc":
			_, err = ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{id}})
		case "elastic-ip":
			_, err = ec.DescribeAddresses(ctx, &ec2.DescribeAddressesInput{AllocationIds: []string{id}})
		}
		if err != nil {
			t.Errorf("decoy %s is gone: %v", d, err)
		}
	}
	if _, err := s3.NewFromConfig(north, func(o *s3.Options) { o.UsePathStyle = true }).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("someone-elses-bucket")}); err != nil {
		t.Errorf("decoy bucket: %v", err)
	}
	ic := iam.NewFromConfig(north)
	for _, d := range fp.Decoys {
		kind, id, _ := strings.Cut(d, " ")
		var err error
		switch kind {
		case "iam-role":
			_, err = ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(id)})
		case "iam-instance-profile":
			var out *iam.GetInstanceProfileOutput
			out, err = ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(id)})
			if err == nil && len(out.InstanceProfile.Roles) == 0 {
				t.Errorf("decoy %s lost its role", d)
			}
		case "iam-policy":
			_, err = ic.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(id)})
		}
		if err != nil {
			t.Errorf("decoy %s is gone: %v", d, err)
		}
	}
	// The shared, untagged policy stays attached to the other team's role.
	attached, err := ic.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String("unrelated-role")})
	if err != nil || len(attached.AttachedPolicies) != 1 {
		t.Errorf("unrelated-role's policy: %v %v", attached, err)
	}
	if _, err := ic.GetUser(ctx, &iam.GetUserInput{UserName: aws.String("someone")}); err != nil {
		t.Errorf("decoy user: %v", err)
	}
	if _, err := eks.NewFromConfig(cfg("eu-west-1")).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("someone-elses-eks")}); err != nil {
		t.Errorf("decoy EKS cluster: %v", err)
	}
}

// assertDeletionOrder checks, from the request log, the rules moto does not
// enforce: NAT gateways before their subnets and Elastic IPs, internet
// gateways detached before deletion, security group rules revoked before
// the group, everything in a VPC before the VPC.
func assertDeletionOrder(t *testing.T, proxy *testenv.FaultProxy, scope []sdk.Resource) {
	t.Helper()
	first := map[string]int{} // "Action id" -> index of first call
	last := map[string]int{}  // "Action id" -> index of last call
	for i, r := range proxy.Requests() {
		for _, p := range []string{"GroupId"} {
			if id := r.Params.Get(p); id != "" {
				last[r.Action+" "+id] = i
			}
		}
		for _, p := range []string{"NatGatewayId", "SubnetId", "AllocationId", "InternetGatewayId", "GroupId", "VpcId", "RouteTableId"} {
			if id := r.Params.Get(p); id != "" {
				key := r.Action + " " + id
				if _, ok := first[key]; !ok {
					first[key] = i
				}
			}
		}
	}
	before := func(a, b string) {
		ia, okA := first[a]
		ib, okB := first[b]
		if !okA || !okB {
			t.Errorf("missing call: %q (%v) or %q (%v)", a, okA, b, okB)
			return
		}
		if ia > ib {
			t.Errorf("%q came after %q", a, b)
		}
	}
	for _, r := range scope {
		switch r.Kind {
		case "subnet", "elastic-ip":
			for _, nat := range r.DependsOn {
				action := map[string]string{"subnet": "DeleteSubnet", "elastic-ip": "ReleaseAddress"}[r.Kind]
				before("DeleteNatGateway "+nat, action+" "+r.ID)
			}
		case "internet-gateway":
			before("DetachInternetGateway "+r.ID, "DeleteInternetGateway "+r.ID)
		case "security-group":
			// Rules are revoked only when a first delete was refused.
			if rev, revoked := first["RevokeSecurityGroupIngress "+r.ID]; revoked && rev > last["DeleteSecurityGroup "+r.ID] {
				t.Errorf("security group %s: rules revoked after its final delete", r.ID)
			}
		case "vpc":
			for _, dep := range r.DependsOn {
				for _, action := range []string{"DeleteSubnet", "DeleteSecurityGroup", "DeleteRouteTable", "DeleteInternetGateway", "DeleteNatGateway"} {
					if _, ok := first[action+" "+dep]; ok {
						before(action+" "+dep, "DeleteVpc "+r.ID)
					}
				}
			}
		}
	}
}
