//go:build capa

// The CAPA lane (task test:capa; docs/testing.md): building CAPA's manager
// and running it costs more than the cold CI budget can carry beside
// everything else, so this file compiles only with -tags capa.

package main_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// The real CAPA, built from its module at the version the trees pin, gets
// the credentials krops wrote and builds what the aws tree's
// eu-north-1-workload asks for in moto; then `krops-sweep cloud aws`
// removes exactly that, and nothing else. In order, as a new account's
// first run goes:
//   - `krops-aws bootstrap aws` creates CAPA's IAM stack (its
//     eks-controlplane role is what CAPA's EKS control plane uses);
//   - `krops-pivot controller-credentials aws` applies capa-system/
//     aws-credentials from the marker credentials;
//   - CAPA runs with that Secret's AWS_B64ENCODED_CREDENTIALS decoded into
//     its shared-credentials file, which is what the Cluster API operator
//     does with the configSecret in a cluster (the one STAND-IN step: the
//     operator is not run here), and with moto behind every endpoint;
//   - the tree's own Cluster, AWSManagedCluster and AWSManagedControlPlane
//     (mgmt/aws/clusters/eu-north-1/workload) and its controller identity
//     are applied; CAPA's webhooks default and validate them;
//   - once CAPA has made the network and the EKS cluster it is stopped, and
//     the sweep runs. The account is then listed again, by the test, not by
//     krops: it must equal the account before the first step, a decoy VPC
//     tagged for another cluster included.
//
// Every AWS call CAPA made through the proxy is signed with the marker
// access key, and the marker secret appears in no output.
func TestSweepRemovesWhatCAPAMade(t *testing.T) {
	t.Parallel() // its own API server, moto and directories
	testenv.Integration(t)
	const (
		key, secret = "AKIAKROPSCAPAMARKER1", "kropsCAPAMarkerSecret/0123456789+abcdef"
		region      = "eu-north-1"
	)
	regions := []string{"eu-north-1", "eu-west-1"}
	ctx := context.Background()
	m := testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})
	api := testenv.APIServer(t, testenv.ClusterOptions{Name: "krops-aws-mgmt", Webhooks: true, CRDs: []testenv.CRDSet{testenv.CAPICore, testenv.CAPA}})
	testenv.RunClusterAPI(t, api)

	root := t.TempDir()
	conf, err := os.ReadFile("../../bootstrap.toml")
	if err != nil {
		t.Fatal(err)
	}
	conf = []byte(strings.Replace(string(conf), `# allowed-accounts = ["123456789012"]`, `allowed-accounts = ["123456789012"]`, 1))
	if err := os.WriteFile(filepath.Join(root, "bootstrap.toml"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	plugins := filepath.Join(root, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	sdktest.Install(t, plugins, "github.com/kropsdev/krops/plugins/aws", "aws")
	env := []string{"PATH=" + sdktest.PathWithoutEngines(t, ""), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + root,
		"KROPS_PLUGIN_DIR=" + plugins, "BOOTSTRAP_CONFIG=" + filepath.Join(root, "bootstrap.toml"), "MGMT_KUBECONFIG=" + api.Kubeconfig,
		"KROPS_AWS_POLL_INTERVAL=0"}
	for _, kv := range m.Environ("") {
		if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") && !strings.HasPrefix(kv, "AWS_SESSION_TOKEN=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret)
	run := func(bin string, args ...string) testenv.Result {
		t.Helper()
		r := testenv.RunBinary(t, root, env, bin, args...)
		if strings.Contains(r.Stdout+r.Stderr, secret) {
			t.Errorf("%s %v printed the secret key", filepath.Base(bin), args)
		}
		if r.Code != 0 {
			t.Fatalf("%s %v: exit %d\n%s\n%s", filepath.Base(bin), args, r.Code, r.Stdout, r.Stderr)
		}
		return r
	}

	decoy := awstest.OwnedVPC(t, m.URL, region, "someone-elses-cluster")
	before := awstest.Inventory(t, m.URL, regions)

	run(builds.Binary(t, "../krops-aws", "krops-aws"), "bootstrap", "aws")
	run(builds.Binary(t, "../krops-pivot", "krops-pivot"), "controller-credentials", "aws")
	var s corev1.Secret
	if err := api.Client.Get(ctx, client.ObjectKey{Namespace: "capa-system", Name: "aws-credentials"}, &s); err != nil {
		t.Fatal(err)
	}
	profile, err := base64.StdEncoding.DecodeString(string(s.Data["AWS_B64ENCODED_CREDENTIALS"]))
	if err != nil {
		t.Fatalf("AWS_B64ENCODED_CREDENTIALS: %v", err)
	}
	credsFile := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(credsFile, profile, 0o600); err != nil {
		t.Fatal(err)
	}

	proxy := testenv.NewFaultProxy(t, m.URL)
	capa := testenv.RunCAPA(t, api, testenv.CAPAOptions{Endpoint: proxy.URL, Region: region, CredentialsFile: credsFile})
	applyTreeFile(t, api, "../../mgmt/aws/infrastructure/aws-identity/identity.yaml", nil)
	applyTreeFile(t, api, "../../mgmt/aws/clusters/eu-north-1/workload/cluster.yaml", map[string]bool{"Cluster": true, "AWSManagedCluster": true, "AWSManagedControlPlane": true})

	// What CAPA makes for an EKS control plane, up to the cluster itself:
	// it stops there in moto (nothing answers at the EKS endpoint).
	var made []string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		made = added(awstest.Inventory(t, m.URL, regions), before)
		if has(made, "eks-cluster default_eu-north-1-workload-control-plane") && has(made, " vpc ") && has(made, " nat-gateway ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CAPA did not make the EKS cluster and its network in 5 minutes; what it made:\n%s\nits log:\n%s",
				strings.Join(made, "\n"), lastLines(capa.Logs("capa-manager"), 60))
		}
		time.Sleep(2 * time.Second)
	}
	capa.Stop()
	t.Logf("CAPA and krops-aws made %d resources:\n%s", len(made), strings.Join(made, "\n"))

	signed := 0
	for _, r := range proxy.Requests() {
		if r.AccessKey == "" {
			continue
		}
		signed++
		if r.AccessKey != key {
			t.Errorf("CAPA signed %s %s with access key %q, not the one krops wrote", r.Service, r.Action, r.AccessKey)
		}
	}
	if signed == 0 {
		t.Fatal("no signed AWS call from CAPA went through the proxy")
	}

	r := run(builds.Binary(t, ".", "krops-sweep"), "cloud", "aws")
	after := awstest.Inventory(t, m.URL, regions)
	if left := added(after, before); len(left) > 0 {
		t.Errorf("the sweep left what CAPA or krops-aws made:\n%s\nsweep output:\n%s", strings.Join(left, "\n"), r.Stdout)
	}
	if gone := added(before, after); len(gone) > 0 {
		t.Errorf("the sweep removed what was there before (the decoy is %s):\n%s\nsweep output:\n%s", decoy, strings.Join(gone, "\n"), r.Stdout)
	}
}

// applyTreeFile creates the documents of a file of the trees whose kind is
// in kinds (all when nil), with Flux's ${VAR:=default} substitutions
// resolved to their defaults.
func applyTreeFile(t *testing.T, c *testenv.Cluster, path string, kinds map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		doc = substituteDefaults(doc)
		kind := ""
		for _, line := range strings.Split(doc, "\n") {
			if k, ok := strings.CutPrefix(line, "kind: "); ok {
				kind = strings.TrimSpace(k)
				break
			}
		}
		if kind == "" || kinds != nil && !kinds[kind] {
			continue
		}
		c.CreateYAML(t, context.Background(), doc)
	}
}

// substituteDefaults resolves ${VAR:=default} to default, as Flux's
// postBuild substitution does for a variable nobody sets.
func substituteDefaults(s string) string {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "}")
		if j < 0 {
			return s
		}
		expr := s[i+2 : i+j]
		_, def, _ := strings.Cut(expr, ":=")
		s = s[:i] + def + s[i+j+1:]
	}
}

// added is what now holds that before does not.
func added(now, before []string) []string {
	var out []string
	for _, l := range now {
		if !slices.Contains(before, l) {
			out = append(out, l)
		}
	}
	return out
}

func has(lines []string, part string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, part) })
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
