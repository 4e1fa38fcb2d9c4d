package main_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/plugins/aws/internal/awsprovider"
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// loadWith starts the real plugin with the given credentials against moto.
func loadWith(t *testing.T, m *testenv.MotoServer, raw []byte, env map[string]string) *sdk.Client {
	t.Helper()
	var stderr strings.Builder
	c, err := sdk.Load(context.Background(), "aws", sdk.LoadOptions{Path: sdktest.Build(t, ".", "aws"), Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	t.Cleanup(func() {
		if strings.Contains(stderr.String(), markerSecret) {
			t.Errorf("the plugin logged the secret key:\n%s", stderr.String())
		}
	})
	if err := c.Configure(context.Background(), sdk.Config{Environment: "aws", Raw: raw}, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok && v != ""
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	markerKey    = "AKIAKROPSMARKER00001"
	markerSecret = "kropsMarkerSecret/never-in-output+0123456789"
	markerToken  = "kropsMarkerSessionToken"
)

// objects decodes the manifests into kind/namespace/name -> object.
func objects(t *testing.T, manifests [][]byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range manifests {
		for _, doc := range strings.Split(string(m), "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatal(err)
			}
			md, _ := o["metadata"].(map[string]any)
			ns, _ := md["namespace"].(string)
			out[o["kind"].(string)+" "+ns+"/"+md["name"].(string)] = o
		}
	}
	return out
}

// The credentials and account values CAPA and ACK read, through the real
// plugin against moto's STS: the after-kind-create hook and the pivot's
// inputs carry the same objects; the CAPA encoding decodes back to the
// credentials; the account id is moto's; nothing secret is printed.
func TestControllersGetTheCredentialsAndAccount(t *testing.T) {
	m := testenv.Moto(t, testenv.MotoOptions{})
	env := m.Env()
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_SESSION_TOKEN"] = markerKey, markerSecret, markerToken
	c := loadWith(t, m, awstest.ProviderConfig(t, hostJSON), env)
	ctx := context.Background()
	hook, err := c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if err != nil {
		t.Fatal(err)
	}
	if msg := strings.Join(hook.Messages, "\n"); strings.Contains(msg, markerSecret) || strings.Contains(msg, markerKey) || !strings.Contains(msg, awstest.Account) {
		t.Errorf("hook messages: %q", msg)
	}
	objs := objects(t, hook.Manifests)
	want := awsprovider.SharedCredentials(markerKey, markerSecret, markerToken, "eu-north-1")
	capa := objs["Secret capa-system/aws-credentials"]
	encoded, _ := capa["stringData"].(map[string]any)[awsprovider.CAPACredentialsKey].(string)
	if decoded, err := base64.StdEncoding.DecodeString(encoded); err != nil || string(decoded) != want {
		t.Errorf("CAPA's %s decodes to %q (%v), want %q", awsprovider.CAPACredentialsKey, decoded, err, want)
	}
	ack := objs["Secret ack-system/aws-credentials"]
	if got, _ := ack["stringData"].(map[string]any)[awsprovider.ACKCredentialsKey].(string); got != want {
		t.Errorf("ACK's credentials: %q", got)
	}
	vars := objs["ConfigMap flux-system/cluster-vars"]
	if d, _ := vars["data"].(map[string]any); d["AWS_ACCOUNT_ID"] != awstest.Account || d["AWS_REGION"] != "eu-north-1" {
		t.Errorf("cluster-vars: %v", vars)
	}
	for _, ns := range []string{"capa-system", "ack-system", "flux-system"} {
		if objs["Namespace /"+ns] == nil {
			t.Errorf("no Namespace %s among %d objects", ns, len(objs))
		}
	}

	in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{})
	if err != nil || len(objects(t, in.Manifests)) != len(objs) || in.Server != "" {
		t.Errorf("pivot inputs: %d objects, server %q, %v", len(objects(t, in.Manifests)), in.Server, err)
	}
	// Another cluster's endpoint question carries no credentials.
	if in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{Cluster: "eu-north-01-workload"}); err != nil || len(in.Manifests) != 0 {
		t.Errorf("a workload's pivot inputs: %v %v", in, err)
	}

	// An account outside the allow-list gets nothing (exit 2 upstream).
	refused := loadWith(t, m, awstest.ProviderConfig(t, hostJSON, `allowed-accounts = ["999999999999"]`), env)
	_, err = refused.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if !errors.Is(err, sdk.ErrRefused) || strings.Contains(err.Error(), markerSecret) {
		t.Errorf("outside allowed-accounts: %v", err)
	}
}
