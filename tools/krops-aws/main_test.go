package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/kropsdev/krops/tools/testenv"
)

// The marker credentials: never in any output of these tests.
const (
	markerKey    = "AKIAKROPSMARKER0001"
	markerSecret = "kropsMarkerSecret/DoNotPrint+0123456789"
	motoAccount  = "123456789012"
	stackName    = "cluster-api-provider-aws-sigs-k8s-io"
)

// awsSite is the repository's bootstrap.toml (allowed-accounts as given),
// the real aws plugin, the krops-aws binary, and moto as every AWS
// endpoint.
type awsSite struct {
	root, bin, plugins string
	moto               *testenv.MotoServer
}

func newSite(t *testing.T) *awsSite {
	t.Helper()
	testenv.Integration(t)
	s := &awsSite{root: t.TempDir(), moto: testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})}
	s.bin = testenv.BuildBinary(t, ".", "krops-aws")
	s.plugins = filepath.Dir(testenv.BuildBinary(t, "../../plugins/aws", "krops-provider-aws"))
	s.allow(t, `["`+motoAccount+`"]`)
	return s
}

// allow writes bootstrap.toml with allowed-accounts set to list ("" leaves
// the repository's line commented out).
func (s *awsSite) allow(t *testing.T, list string) {
	t.Helper()
	conf, err := os.ReadFile("../../bootstrap.toml")
	if err != nil {
		t.Fatal(err)
	}
	if list != "" {
		conf = []byte(strings.Replace(string(conf), `# allowed-accounts = ["123456789012"]`, `allowed-accounts = `+list, 1))
		if !strings.Contains(string(conf), "allowed-accounts = "+list) {
			t.Fatal("bootstrap.toml has no commented allowed-accounts line to set")
		}
	}
	if err := os.WriteFile(filepath.Join(s.root, "bootstrap.toml"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs krops-aws with the marker credentials; its output never holds
// them.
func (s *awsSite) run(t *testing.T, args ...string) testenv.Result {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.root, "KROPS_PLUGIN_DIR=" + s.plugins, "BOOTSTRAP_CONFIG=" + filepath.Join(s.root, "bootstrap.toml"),
		"AWS_ACCESS_KEY_ID=" + markerKey, "AWS_SECRET_ACCESS_KEY=" + markerSecret}
	for _, kv := range s.moto.Environ("") {
		if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			env = append(env, kv)
		}
	}
	r := testenv.RunBinary(t, s.root, env, s.bin, args...)
	for _, m := range []string{markerSecret, markerKey, base64.StdEncoding.EncodeToString([]byte(markerSecret))} {
		if strings.Contains(r.Stdout+r.Stderr, m) {
			t.Errorf("krops-aws %v printed a credential:\n%s\n%s", args, r.Stdout, r.Stderr)
		}
	}
	return r
}

func (s *awsSite) cfn(t *testing.T) (*cloudformation.Client, *iam.Client) {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion("eu-north-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		awsconfig.WithBaseEndpoint(s.moto.URL))
	if err != nil {
		t.Fatal(err)
	}
	return cloudformation.NewFromConfig(cfg), iam.NewFromConfig(cfg)
}

// bootstrap against moto: the dry run changes nothing and shows the
// template; the run creates CAPA's stack (its roles exist in IAM); a rerun
// and a dry run find nothing to change; an account outside
// allowed-accounts, or none listed, is refused (exit 2) before anything
// is read from CloudFormation.
func TestBootstrapCreatesCAPAsStackOnce(t *testing.T) {
	t.Parallel() // its own moto and directories
	s := newSite(t)
	ctx := context.Background()
	cfn, iamc := s.cfn(t)
	exists := func() *cfntypes.Stack {
		out, err := cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stackName)})
		if err != nil || len(out.Stacks) == 0 {
			return nil
		}
		return &out.Stacks[0]
	}

	r := s.run(t, "bootstrap", "aws", "--dry-run")
	if r.Code != 0 || !strings.Contains(r.Stdout, "does not exist in account "+motoAccount+", region eu-north-1") ||
		!strings.Contains(r.Stdout, "Add AWS::IAM::Role") || !strings.Contains(r.Stdout, "controllers.cluster-api-provider-aws.sigs.k8s.io") {
		t.Fatalf("dry run: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if st := exists(); st != nil {
		t.Fatalf("the dry run made stack %s (%s)", stackName, st.StackStatus)
	}

	r = s.run(t, "bootstrap", "aws")
	if r.Code != 0 || !strings.Contains(r.Stderr, "stack "+stackName+" created in account "+motoAccount) {
		t.Fatalf("bootstrap: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if st := exists(); st == nil || st.StackStatus != cfntypes.StackStatusCreateComplete {
		t.Fatalf("after bootstrap the stack is %+v", st)
	}
	for _, role := range []string{"controllers.cluster-api-provider-aws.sigs.k8s.io", "control-plane.cluster-api-provider-aws.sigs.k8s.io", "nodes.cluster-api-provider-aws.sigs.k8s.io", "eks-controlplane.cluster-api-provider-aws.sigs.k8s.io"} {
		if _, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); err != nil {
			t.Errorf("role %s after bootstrap: %v", role, err)
		}
	}

	for _, args := range [][]string{{"bootstrap", "aws"}, {"bootstrap", "aws", "--dry-run"}} {
		r = s.run(t, args...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "is up to date: nothing to change") {
			t.Errorf("%v on the created stack: exit %d\n%s\n%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}

	// A stack made from an older template (one role fewer): the dry run
	// lists the change and makes none; the run applies it; then nothing
	// is left to change.
	older := strings.Replace(iamstackTemplate(t), `"AWSIAMRoleEKSControlPlane"`, `"RemovedForTheTest"`, 1)
	older = removeResource(t, older, "RemovedForTheTest")
	if _, err := cfn.UpdateStack(ctx, &cloudformation.UpdateStackInput{StackName: aws.String(stackName), TemplateBody: aws.String(older),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam}}); err != nil {
		t.Fatal(err)
	}
	eksRole := &iam.GetRoleInput{RoleName: aws.String("eks-controlplane.cluster-api-provider-aws.sigs.k8s.io")}
	waitFor(t, func() bool { _, err := iamc.GetRole(ctx, eksRole); return err != nil })
	r = s.run(t, "bootstrap", "aws", "--dry-run")
	if r.Code != 0 || !strings.Contains(r.Stdout, "would change (change set") || !strings.Contains(r.Stdout, "AWSIAMRoleEKSControlPlane") {
		t.Errorf("dry run on an older stack: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := iamc.GetRole(ctx, eksRole); err == nil {
		t.Error("the dry run changed the stack")
	}
	r = s.run(t, "bootstrap", "aws")
	if r.Code != 0 || !strings.Contains(r.Stderr, "stack "+stackName+" updated") {
		t.Fatalf("update: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// moto records an executed change set's template and status but
	// makes none of its new resources (a stand-in's limit: real
	// CloudFormation creates the role), so the template is what is checked.
	if st := exists(); st == nil || st.StackStatus != cfntypes.StackStatusUpdateComplete {
		t.Errorf("after the update the stack is %+v", st)
	}
	tmpl, err := cfn.GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: aws.String(stackName)})
	if err != nil || !sameJSON(aws.ToString(tmpl.TemplateBody), iamstackTemplate(t)) {
		t.Errorf("after the update the stack's template is not CAPA's (%v)", err)
	}
	if r = s.run(t, "bootstrap", "aws"); r.Code != 0 || !strings.Contains(r.Stdout, "is up to date") {
		t.Errorf("after the update: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}

	s.allow(t, `["210987654321"]`)
	r = s.run(t, "bootstrap", "aws")
	if r.Code != 2 || !strings.Contains(r.Stderr, "AWS account "+motoAccount+" is not in environments.aws.allowed-accounts") {
		t.Errorf("another account: exit %d\n%s", r.Code, r.Stderr)
	}
	s.allow(t, "")
	r = s.run(t, "bootstrap", "aws", "--dry-run")
	if r.Code != 2 || !strings.Contains(r.Stderr, "has no allowed-accounts") || !strings.Contains(r.Stderr, `allowed-accounts = ["`+motoAccount+`"]`) {
		t.Errorf("no allowed-accounts: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := s.run(t, "bootstrap", "local-host"); r.Code != 2 || !strings.Contains(r.Stderr, "provider docker") {
		t.Errorf("an environment of another provider: exit %d\n%s", r.Code, r.Stderr)
	}
}

// credentials prints whose credentials they are and never the keys; with
// --write it writes clusterawsadm's encode-as-profile form (0600), which
// decodes back to the keys it was given.
func TestCredentialsAreWrittenOnlyWhenAsked(t *testing.T) {
	t.Parallel() // its own moto and directories
	s := newSite(t)
	r := s.run(t, "credentials", "aws")
	if r.Code != 0 || !strings.Contains(r.Stdout, "account "+motoAccount+", region eu-north-1") || !strings.Contains(r.Stdout, "not shown") {
		t.Fatalf("credentials: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	file := filepath.Join(s.root, "creds", "capa.b64")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	// A wider-readable file there is replaced, not reused.
	if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.run(t, "credentials", "aws", "--write", file)
	if r.Code != 0 {
		t.Fatalf("credentials --write: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the written file: %v, mode %v; want 0600", err, fi.Mode())
	}
	b, _ := os.ReadFile(file)
	ini, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		t.Fatalf("the file is not base64: %v", err)
	}
	for _, line := range []string{"[default]\n", "aws_access_key_id = " + markerKey + "\n", "aws_secret_access_key = " + markerSecret + "\n", "region = eu-north-1\n"} {
		if !strings.Contains(string(ini), line) {
			t.Errorf("the decoded profile has no line %q", strings.TrimSpace(strings.Split(line, "=")[0]))
		}
	}
	if r := s.run(t, "credentials", "aws", "--write", s.root); r.Code == 0 || !strings.Contains(r.Stderr, "is a d") {
		t.Errorf("--write to a directory: exit %d\n%s", r.Code, r.Stderr)
	}
	s.allow(t, `["210987654321"]`)
	if r := s.run(t, "credentials", "aws", "--write", file+".other"); r.Code != 2 {
		t.Errorf("another account: exit %d\n%s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(file + ".other"); err == nil {
		t.Error("credentials of a refused account were written")
	}
}

func iamstackTemplate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("internal/iamstack/template.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// removeResource drops one resource from a JSON template.
func removeResource(t *testing.T, template, id string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(template), &v); err != nil {
		t.Fatal(err)
	}
	delete(v["Resources"].(map[string]any), id)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond for up to a minute: moto applies a stack update in
// the background of its answer.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
