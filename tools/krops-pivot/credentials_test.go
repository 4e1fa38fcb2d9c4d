package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

// After the pivot, kind is gone: `krops-pivot controller-credentials aws`
// applies what the real aws plugin supplies from the current credentials
// (moto's STS for the account) on the management cluster (a real API
// server), replacing rotated credentials; the output names the objects and
// never shows the secret.
func TestControllerCredentialsAreAppliedAgainAfterThePivot(t *testing.T) {
	testenv.Integration(t)
	m := testenv.Moto(t, testenv.MotoOptions{})
	mgmt := testenv.APIServer(t, testenv.ClusterOptions{Name: "krops-aws-mgmt"})
	root := t.TempDir()
	conf, err := os.ReadFile("../../bootstrap.toml")
	if err != nil {
		t.Fatal(err)
	}
	conf = []byte(strings.Replace(string(conf), `# allowed-accounts = ["123456789012"]`, `allowed-accounts = ["123456789012"]`, 1))
	if err := os.WriteFile(filepath.Join(root, "bootstrap.toml"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, ".", "krops-pivot")
	plugins := filepath.Dir(testenv.BuildBinary(t, "../../plugins/aws", "krops-provider-aws"))
	run := func(secret string) testenv.Result {
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MGMT_KUBECONFIG=" + mgmt.Kubeconfig, "KROPS_PLUGIN_DIR=" + plugins,
			"BOOTSTRAP_CONFIG=" + filepath.Join(root, "bootstrap.toml")}
		for _, kv := range m.Environ("") {
			if !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
				env = append(env, kv)
			}
		}
		r := testenv.RunBinary(t, root, append(env, "AWS_SECRET_ACCESS_KEY="+secret), bin, "controller-credentials", "aws")
		if strings.Contains(r.Stdout+r.Stderr, secret) {
			t.Errorf("the output shows the secret key:\n%s\n%s", r.Stdout, r.Stderr)
		}
		return r
	}
	ctx := context.Background()
	for _, secret := range []string{"kropsFirstSecret/0123456789", "kropsRotatedSecret/9876543210"} {
		r := run(secret)
		if r.Code != 0 || !strings.Contains(r.Stderr, "applied Secret capa-system/aws-credentials") || !strings.Contains(r.Stderr, "applied ConfigMap flux-system/cluster-vars") {
			t.Fatalf("controller-credentials: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		var ack corev1.Secret
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "ack-system", Name: "aws-credentials"}, &ack); err != nil || !strings.Contains(string(ack.Data["credentials"]), "aws_secret_access_key = "+secret+"\n") {
			t.Errorf("ACK's credentials after applying %s: %v", secret[:10], err)
		}
	}
	// No management cluster context: a refusal naming it.
	r := testenv.RunBinary(t, root, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MGMT_KUBECONFIG=" + filepath.Join(root, "none.yaml"),
		"BOOTSTRAP_CONFIG=" + filepath.Join(root, "bootstrap.toml")}, bin, "controller-credentials", "aws")
	if r.Code != 2 || !strings.Contains(r.Stderr, "krops-aws-mgmt") {
		t.Errorf("without the management cluster: exit %d\n%s", r.Code, r.Stderr)
	}
}
