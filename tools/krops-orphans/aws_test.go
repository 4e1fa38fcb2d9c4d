package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// idPattern matches the ids moto generates at random, so golden files can
// hold stable placeholders.
var idPattern = regexp.MustCompile(`\b(vpc|subnet|igw|rtb|sg|nat|eipalloc)-[0-9a-f]{8,17}\b`)

func normalise(s string) string {
	return idPattern.ReplaceAllString(s, "$1-<id>")
}

// awsFixture runs krops-orphans with the real aws plugin against moto
// through a fault proxy that fails the test on any mutating call.
func awsFixture(t *testing.T) (fixture, *testenv.FaultProxy, []string) {
	t.Helper()
	f := setup(t, "{}")
	if err := os.WriteFile(filepath.Join(f.dir, "bootstrap.toml"), []byte(awstest.BootstrapTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	sdktest.Install(t, f.pluginDir, "github.com/kropsdev/krops/plugins/aws", "aws")
	m := testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})
	awstest.Build(t, m.URL, awstest.Options{ObjectVersions: 2})
	proxy := testenv.NewFaultProxy(t, m.URL)
	t.Cleanup(func() { proxy.AssertNoMutation(t) })
	return f, proxy, m.Environ(proxy.URL)
}

func TestAWSReportAgainstMotoIsReadOnly(t *testing.T) {
	f, _, env := awsFixture(t)
	// moto stamps everything "now": evaluate the report 10 hours later.
	later := time.Now().UTC().Add(10 * time.Hour).Format(time.RFC3339)
	out, errOut, code := f.run(t, env, "aws", "--now", later)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	norm := normalise(out)
	norm = regexp.MustCompile(`Scanned at: \S+`).ReplaceAllString(norm, "Scanned at: <time>")
	// Table rows in a stable order once ids are placeholders.
	lines := strings.Split(norm, "\n")
	var rows, rest []string
	for _, l := range lines {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| Kind") && !strings.HasPrefix(l, "| Run") && strings.Count(l, "|") == 7 {
			rows = append(rows, l)
		} else {
			rest = append(rest, l)
		}
	}
	sort.Strings(rows)
	golden(t, "aws-report.md", strings.Join(rest, "\n")+"\n--- rows (sorted) ---\n"+strings.Join(rows, "\n")+"\n")
	for _, decoy := range []string{"someone-elses", "unrelated-role", "| iam-user | global | someone |"} {
		if strings.Contains(out, decoy) {
			t.Errorf("decoy %q in the report", decoy)
		}
	}
	// An hour after creation the timed resources are recent, and the
	// VPC-side ones (no creation time in EC2) stay orphans.
	soon := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	out, _, code = f.run(t, env, "aws", "--now", soon, "--output", "json")
	if code != 0 || !strings.Contains(out, `"recent_count": 32`) {
		t.Errorf("an hour later, timed resources are recent:\n%s", out)
	}
}

func TestAWSReportWithAFailingResourceType(t *testing.T) {
	f, proxy, env := awsFixture(t)
	proxy.Add(testenv.Rule{Action: "DescribeDBInstances", Status: 403, Code: "AccessDenied"})
	out, _, code := f.run(t, env, "aws")
	if code != 3 {
		t.Errorf("exit %d, want 3: the report is incomplete", code)
	}
	if !strings.Contains(out, "- rds-instance in eu-north-1: ") || !strings.Contains(out, "- rds-instance in eu-west-1: ") || !strings.Contains(out, "| eks-cluster |") {
		t.Errorf("the failing type must be listed under Errors and the rest reported:\n%s", out)
	}
}

// Exit codes by the contract, through the real binary: a refused account
// is a configuration error (2) with no report and no sweep suggested; an
// account that cannot be read is an unknown state (3), with no report that
// would claim an empty account.
func TestAWSReportExitCodes(t *testing.T) {
	f, proxy, env := awsFixture(t)
	refused := strings.Replace(awstest.BootstrapTOML, "provider = \"aws\"\n", "provider = \"aws\"\nallowed-accounts = [\"999999999999\"]\n", 1)
	// Keys the aws plugin owns: one it does not declare (a typo), refused
	// by the host; values it declares but finds wrong, refused by the
	// plugin's Configure. Both exit 2 naming the file and the key.
	typo := strings.Replace(awstest.BootstrapTOML, "[[environments.aws.teardown.aws-workloads]]", "mgmt-iam-role-prefx = \"krops\"\n[[environments.aws.teardown.aws-workloads]]", 1)
	badAccount := strings.Replace(awstest.BootstrapTOML, "provider = \"aws\"\n", "provider = \"aws\"\nallowed-accounts = [\"12345\"]\n", 1)
	badPattern := strings.Replace(awstest.BootstrapTOML, "krops-{account_id}-{cluster_name}-data", "krops-{cluster_name}-data", 1)
	for name, body := range map[string]string{"refused.toml": refused, "typo.toml": typo, "account.toml": badAccount, "pattern.toml": badPattern} {
		if body == awstest.BootstrapTOML {
			t.Fatalf("%s: the fixture did not change; the test would prove nothing", name)
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Add(testenv.Rule{Path: "^/deny", Status: 403, Code: "InvalidClientTokenId"})
	cases := []struct {
		name string
		env  []string
		code int
		want string
	}{
		{"account outside allowed-accounts", []string{"BOOTSTRAP_CONFIG=refused.toml"}, 2, "AWS account 123456789012 is not in environments.aws.allowed-accounts [999999999999]"},
		{"a key the provider does not declare", []string{"BOOTSTRAP_CONFIG=typo.toml"}, 2, `typo.toml: unknown key "environments.aws.teardown.mgmt-iam-role-prefx"`},
		{"an account id the provider refuses", []string{"BOOTSTRAP_CONFIG=account.toml"}, 2, `environments.aws.allowed-accounts[0] "12345" is not an AWS account id`},
		{"a bucket pattern the provider refuses", []string{"BOOTSTRAP_CONFIG=pattern.toml"}, 2, "providers.aws.teardown.s3-bucket-pattern"},
		{"endpoint unreachable", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, 3, "nothing could be read, so there is no report"},
		{"credentials refused", []string{"AWS_ENDPOINT_URL=" + proxy.URL + "/deny"}, 3, "could not read the AWS account"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := f.run(t, append(append([]string{}, env...), tc.env...), "aws")
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, tc.code, tc.want)
			}
			if strings.Contains(out, "Orphans:") || strings.Contains(out, "krops-sweep") {
				t.Errorf("a report was printed for an account that was not read:\n%s", out)
			}
		})
	}
}

// An AWS endpoint that accepts connections and never answers gives no
// report and exit 3 within a minute, naming the endpoint.
func TestAWSReportWithASilentEndpoint(t *testing.T) {
	f, _, env := awsFixture(t)
	endpoint := "http://" + testenv.SilentEndpoint(t)
	start := time.Now()
	out, errOut, code := f.run(t, append(env, "AWS_ENDPOINT_URL="+endpoint), "aws")
	took := time.Since(start)
	if code != 3 || !strings.Contains(errOut, "the AWS endpoint "+endpoint+" did not answer") || strings.Contains(out, "Orphans:") {
		t.Errorf("silent endpoint: exit %d, want 3 naming %s and no report\n%s\n%s", code, endpoint, errOut, out)
	}
	if took > time.Minute {
		t.Errorf("silent endpoint: the verdict took %s, want under a minute", took.Round(time.Second))
	}
}
