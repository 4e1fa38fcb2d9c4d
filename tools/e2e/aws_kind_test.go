package e2e_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
)

// `krops-kind up aws` gives CAPA and ACK their credentials and Flux the
// account id on kind, before the seed: the real aws provider plugin reads
// the default credential chain (marker keys) and moto's STS, and krops-kind
// applies what it supplies on the (stand-in) kind cluster's real API
// server. The marker secret appears in no output. Then the real
// kustomize-controller on kind builds mgmt/aws/ack/resources with the
// account id from the cluster-vars krops-kind wrote.
func TestAWSKindGetsTheControllersCredentials(t *testing.T) {
	testenv.Integration(t)
	const (
		key, secret, token = "AKIAKROPSE2EMARKER01", "kropsE2EMarkerSecret/0123456789+abcdef", "kropsE2EMarkerToken"
	)
	m := testenv.Moto(t, testenv.MotoOptions{})
	k := newStandInKind(t)
	bins := buildBinaries(t)
	plugins := filepath.Dir(testenv.BuildBinary(t, "../../plugins/aws", "krops-provider-aws"))
	root := t.TempDir()
	conf, err := os.ReadFile(filepath.Join(repo, "bootstrap.toml"))
	if err != nil {
		t.Fatal(err)
	}
	conf = []byte(strings.Replace(string(conf), `# allowed-accounts = ["123456789012"]`, `allowed-accounts = ["123456789012"]`, 1))
	if err := os.WriteFile(filepath.Join(root, "bootstrap.toml"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	images, err := os.ReadFile(filepath.Join(repo, "airgap", "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "airgap"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "airgap", "images.txt"), images, 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{"PATH=" + sdktest.PathWithoutEngines(t, "", standInEngine(t, "5001", 1)), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1],
		"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "KUBECONFIG=" + filepath.Join(home, ".kube", "config"),
		"BOOTSTRAP_CONFIG=" + filepath.Join(root, "bootstrap.toml"), "KROPS_PLUGIN_DIR=" + plugins, "KROPS_STANDIN_KIND_URL=" + k.URL}
	for _, kv := range m.Environ("") {
		if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") && !strings.HasPrefix(kv, "AWS_SESSION_TOKEN=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret, "AWS_SESSION_TOKEN="+token)
	l := &lifecycle{root: root, bin: bins, env: env, kind: k}
	r := l.run(t, runOptions{}, "krops-kind", "up", "aws")
	if r.Code != 0 {
		t.Fatalf("krops-kind up aws: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"applied Secret capa-system/aws-credentials", "applied Secret ack-system/aws-credentials", "applied ConfigMap flux-system/cluster-vars", "account 123456789012"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("krops-kind up lacks %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stdout+r.Stderr, secret) || strings.Contains(r.Stdout+r.Stderr, token) {
		t.Error("krops-kind printed the credentials")
	}
	apis := k.apis()
	if len(apis) != 1 {
		t.Fatalf("%d kind clusters", len(apis))
	}
	ctx := context.Background()
	var capa, ack corev1.Secret
	var vars corev1.ConfigMap
	c := apis[0].Client
	if err := c.Get(ctx, client.ObjectKey{Namespace: "capa-system", Name: "aws-credentials"}, &capa); err != nil {
		t.Fatal(err)
	}
	ini, err := base64.StdEncoding.DecodeString(string(capa.Data["AWS_B64ENCODED_CREDENTIALS"]))
	if err != nil || !strings.Contains(string(ini), "aws_secret_access_key = "+secret) || !strings.Contains(string(ini), "aws_session_token = "+token) {
		t.Errorf("CAPA's credentials decode to %q (%v)", ini, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ack-system", Name: "aws-credentials"}, &ack); err != nil || string(ack.Data["credentials"]) != string(ini) {
		t.Errorf("ACK's credentials: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "cluster-vars"}, &vars); err != nil || vars.Data["AWS_ACCOUNT_ID"] != "123456789012" {
		t.Errorf("cluster-vars: %v %v", vars.Data, err)
	}

	// The real kustomize-controller on kind reconciles mgmt/aws/ack's
	// resources with the account id from cluster-vars, as Flux will once
	// the seed hands it the tree (published here to a loopback registry).
	ackResourcesReconcile(t, apis[0], "123456789012")

	// A rerun on the same kind applies the same objects: nothing changes.
	before := capa.ResourceVersion
	if r := l.run(t, runOptions{}, "krops-kind", "up", "aws"); r.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "capa-system", Name: "aws-credentials"}, &capa); err != nil || capa.ResourceVersion != before {
		t.Errorf("the rerun rewrote an unchanged Secret (resourceVersion %s -> %s, %v)", before, capa.ResourceVersion, err)
	}
}

// ackKinds are STAND-IN CustomResourceDefinitions for the ACK kinds
// mgmt/aws/ack/resources applies (the ACK controllers' own CRDs are not in
// the harness): schemaless, so the API server stores what Flux applies.
var ackKinds = []struct{ group, kind, plural string }{
	{"s3.services.k8s.aws", "Bucket", "buckets"},
	{"rds.services.k8s.aws", "DBInstance", "dbinstances"},
	{"iam.services.k8s.aws", "Role", "roles"},
	{"iam.services.k8s.aws", "User", "users"},
}

func ackResourcesReconcile(t *testing.T, kind *testenv.Cluster, account string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range ackKinds {
		kind.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[3]s.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[2]s, plural: %[3]s}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, k.group, k.kind, k.plural))
	}
	reg := testenv.Registry(t)
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: repo, Paths: []string{"mgmt/aws/ack"}, Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := configartifact.Push(ctx, a, reg.Host+"/krops/aws:latest", configartifact.PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	// mgmt/aws/ack/flux-ks.yaml's ack-resources, from the artifact.
	kind.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: aws, namespace: flux-system}
spec: {interval: 1m, url: oci://%s/krops/aws, insecure: true, ref: {tag: latest}}
`, reg.Host))
	kind.CreateYAML(t, ctx, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ack-resources, namespace: flux-system}
spec:
  interval: 5m
  retryInterval: 2s
  timeout: 1m
  prune: true
  path: ./mgmt/aws/ack/resources
  sourceRef: {kind: OCIRepository, name: aws}
  postBuild:
    substituteFrom:
    - {kind: ConfigMap, name: cluster-vars}
    - {kind: ConfigMap, name: krops-run, optional: true}
`)
	bucket := &unstructured.Unstructured{}
	bucket.SetGroupVersionKind(schema.GroupVersionKind{Group: "s3.services.k8s.aws", Version: "v1alpha1", Kind: "Bucket"})
	want := "krops-" + account + "-eu-north-1-workload-data"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := kind.Client.Get(ctx, client.ObjectKey{Namespace: "ack-system", Name: "eu-north-1-workload-data"}, bucket)
		if name, _, _ := unstructured.NestedString(bucket.Object, "spec", "name"); err == nil && name == want {
			return
		}
		if time.Now().After(deadline) {
			ks := &unstructured.Unstructured{}
			ks.SetGroupVersionKind(schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"})
			_ = kind.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "ack-resources"}, ks)
			st, _, _ := unstructured.NestedSlice(ks.Object, "status", "conditions")
			t.Fatalf("Bucket ack-system/eu-north-1-workload-data with spec.name %s: %v %v; Kustomization conditions: %v", want, err, bucket.Object["spec"], st)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
