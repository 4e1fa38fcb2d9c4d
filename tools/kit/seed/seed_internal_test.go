package seed

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/testenv"
)

func apiServer(t *testing.T, name string) (*testenv.Cluster, kubernetes.Interface) {
	t.Helper()
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: name})
	kc := kubernetes.NewForConfigOrDie(c.Config)
	if err := ensureNamespace(context.Background(), kc, "flux-system"); err != nil {
		t.Fatal(err)
	}
	return c, kc
}

func TestRunMetadataRules(t *testing.T) {
	ctx := context.Background()
	_, kc := apiServer(t, "target")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := Options{Namespace: "flux-system", Environment: "local-host", Run: runmeta.Options{Environment: "local-host", Now: now, Revision: "main@sha1:abc"}}

	tags, action, err := runMetadata(ctx, kc, o)
	if err != nil || action != "new" || tags.RunID != "local-host-20261201t100000z" || tags.ExpiresAt != "2026-12-02T10:00:00Z" {
		t.Fatalf("fresh: %+v %s %v", tags, action, err)
	}
	// The environment is on the ConfigMap, for a teardown to tell whose it is.
	if cm, err := kc.CoreV1().ConfigMaps("flux-system").Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{}); err != nil || cm.Labels[runmeta.LabelEnvironment] != "local-host" {
		t.Errorf("the run metadata's environment label: %v (%v)", cm.Labels, err)
	}
	// Another environment's cluster (they share names): refused, unchanged.
	other := o
	other.Environment = "aws"
	if _, _, err := runMetadata(ctx, kc, other); !errors.Is(err, ErrRunMetadata) || !strings.Contains(err.Error(), "belongs to environment local-host (run "+tags.RunID+"), not aws") {
		t.Errorf("another environment's run metadata: %v", err)
	}
	// KROPS_RUN_ID matching what is there: reused unchanged.
	o.Run.RunID = tags.RunID
	o.Run.Now = now.Add(time.Hour)
	again, action, err := runMetadata(ctx, kc, o)
	if err != nil || action != "kept" || again != tags {
		t.Errorf("reuse: %+v %s %v", again, action, err)
	}
	// Another run's id: stop and say whose it is.
	o.Run.RunID = "someone-else"
	if _, _, err := runMetadata(ctx, kc, o); !errors.Is(err, ErrRunMetadata) || !strings.Contains(err.Error(), "belongs to run "+tags.RunID) {
		t.Errorf("other run: %v", err)
	}
	// Malformed: name the key.
	cm, _ := kc.CoreV1().ConfigMaps("flux-system").Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	delete(cm.Data, runmeta.KeyRevision)
	if _, err := kc.CoreV1().ConfigMaps("flux-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.Run.RunID = tags.RunID
	if _, _, err := runMetadata(ctx, kc, o); !errors.Is(err, ErrRunMetadata) || !strings.Contains(err.Error(), "key KROPS_REVISION is missing") {
		t.Errorf("malformed: %v", err)
	}

	// --copy-run-from copies the four keys exactly from another cluster,
	// and never invents one.
	src, srcKC := apiServer(t, "source")
	want := runmeta.Tags{RunID: "aws-20261130t090000z", Revision: "main@sha1:def", ExpiresAt: "never", RunKind: "ci"}
	if _, err := srcKC.CoreV1().ConfigMaps("flux-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: runmeta.ConfigMapName, Namespace: "flux-system"}, Data: want.Data()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.CopyFrom = &kubecfg.Ref{Path: src.Kubeconfig, Context: src.Context}
	got, action, err := runMetadata(ctx, kc, o)
	if err != nil || got != want || !strings.HasPrefix(action, "copied") {
		t.Fatalf("copy: %+v %s %v", got, action, err)
	}
	cm, _ = kc.CoreV1().ConfigMaps("flux-system").Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	if tags, err := runmeta.FromData(cm.Data); err != nil || tags != want {
		t.Errorf("copied ConfigMap: %v %v", cm.Data, err)
	}
	empty, _ := apiServer(t, "empty")
	o.CopyFrom = &kubecfg.Ref{Path: empty.Kubeconfig, Context: empty.Context}
	if _, _, err := runMetadata(ctx, kc, o); !errors.Is(err, ErrRunMetadata) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("copying from a cluster without run metadata must fail, never invent: %v", err)
	}
}

func TestSecretsAreReplacedWhole(t *testing.T) {
	ctx := context.Background()
	_, kc := apiServer(t, "target")
	o := Options{Namespace: "flux-system", PATSecret: "flux-github-pat", AgeSecret: "sops-age",
		Secrets: Secrets{GitHubToken: "ghp_first", AgeIdentity: []byte("AGE-SECRET-KEY-1FIRST"), AgePublic: "age1first"}}
	if err := applySecrets(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	o.Secrets = Secrets{GitHubUser: "bot", GitHubToken: "ghp_second", AgeIdentity: []byte("AGE-SECRET-KEY-1SECOND"), AgePublic: "age1second"}
	if err := applySecrets(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	pat, _ := kc.CoreV1().Secrets("flux-system").Get(ctx, "flux-github-pat", metav1.GetOptions{})
	if string(pat.Data["username"]) != "bot" || string(pat.Data["password"]) != "ghp_second" {
		t.Errorf("PAT secret: %v", pat.Data)
	}
	for _, ns := range []string{"flux-system", "default"} {
		s, err := kc.CoreV1().Secrets(ns).Get(ctx, "sops-age", metav1.GetOptions{})
		if err != nil || len(s.Data) != 1 || string(s.Data["age1second.agekey"]) != "AGE-SECRET-KEY-1SECOND" {
			t.Errorf("sops-age in %s must hold the new key only: %v %v", ns, keys(s), err)
		}
	}
	// Unchanged values: no write (the resourceVersion stays).
	before, _ := kc.CoreV1().Secrets("default").Get(ctx, "sops-age", metav1.GetOptions{})
	if err := applySecrets(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	after, _ := kc.CoreV1().Secrets("default").Get(ctx, "sops-age", metav1.GetOptions{})
	if before.ResourceVersion != after.ResourceVersion {
		t.Error("an unchanged Secret was written again")
	}
}

// krops-sync says where the cluster's Flux syncs from, for the trees to
// substitute; a new source replaces it, an unchanged one is not written.
func TestSyncVarsFollowTheSource(t *testing.T) {
	ctx := context.Background()
	_, kc := apiServer(t, "sync")
	o := Options{Namespace: "flux-system", Sync: Sync{Kind: SyncOCI, URL: "oci://reg-a:5000/krops", Ref: "latest"}}
	if err := applySyncVars(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	o.Sync = Sync{Kind: SyncOCI, URL: "oci://my-registry:5000/team/krops", Ref: "v2"}
	if err := applySyncVars(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	cm, err := kc.CoreV1().ConfigMaps("flux-system").Get(ctx, SyncConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"KROPS_SYNC_KIND": "oci", "KROPS_SYNC_URL": "oci://my-registry:5000/team/krops", "KROPS_SYNC_REF": "v2"}
	if !maps.Equal(cm.Data, want) {
		t.Errorf("%s holds %v, want %v", SyncConfigMapName, cm.Data, want)
	}
	if err := applySyncVars(ctx, kc, o); err != nil {
		t.Fatal(err)
	}
	if again, _ := kc.CoreV1().ConfigMaps("flux-system").Get(ctx, SyncConfigMapName, metav1.GetOptions{}); again.ResourceVersion != cm.ResourceVersion {
		t.Error("an unchanged krops-sync was written again")
	}

	// A chart repository the run sets reaches the trees' HelmRepositories:
	// its URL, the HelmRepository type it needs and whether it is plain
	// HTTP. Unset again, the keys go, so the trees fall back to upstream.
	for _, c := range []struct {
		charts    Charts
		providers Providers
		flux      string
		want      map[string]string
	}{
		{Charts{Repository: "oci://krops-registry:5000/charts/", Insecure: true}, Providers{}, "", map[string]string{"KROPS_CHART_REPOSITORY": "oci://krops-registry:5000/charts", "KROPS_CHART_REPOSITORY_TYPE": "oci", "KROPS_CHART_REPOSITORY_INSECURE": "true", "KROPS_OCI_CHART_REPOSITORY": "oci://krops-registry:5000/charts"}},
		{Charts{Repository: "https://charts.example/all"}, Providers{}, "", map[string]string{"KROPS_CHART_REPOSITORY": "https://charts.example/all", "KROPS_CHART_REPOSITORY_TYPE": "default", "KROPS_CHART_REPOSITORY_INSECURE": "false"}},
		// A provider repository: the fetchConfig key and the prefix in the
		// operator's notation (no oci://; http:// for plain HTTP).
		{Charts{}, Providers{Repository: "oci://krops-registry:5000/capi/", PlainHTTP: true}, "", map[string]string{"KROPS_PROVIDER_FETCH": "oci", "KROPS_PROVIDER_REPOSITORY": "http://krops-registry:5000/capi"}},
		{Charts{}, Providers{Repository: "oci://mirror.example/capi"}, "", map[string]string{"KROPS_PROVIDER_FETCH": "oci", "KROPS_PROVIDER_REPOSITORY": "mirror.example/capi"}},
		// A Flux registry other than upstream's reaches the workload
		// clusters' FluxInstance; upstream's is the trees' default.
		{Charts{}, Providers{}, "localhost:5001/fluxcd", map[string]string{"KROPS_FLUX_REGISTRY": "localhost:5001/fluxcd"}},
		{Charts{}, Providers{}, "ghcr.io/fluxcd", nil},
		{Charts{}, Providers{}, "", nil},
	} {
		o.Charts, o.Providers, o.FluxRegistry = c.charts, c.providers, c.flux
		if err := applySyncVars(ctx, kc, o); err != nil {
			t.Fatal(err)
		}
		cm, err := kc.CoreV1().ConfigMaps("flux-system").Get(ctx, SyncConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		full := maps.Clone(want)
		maps.Copy(full, c.want)
		if !maps.Equal(cm.Data, full) {
			t.Errorf("with %+v %s holds %v, want %v", c.charts, SyncConfigMapName, cm.Data, full)
		}
	}
}

func keys(s *corev1.Secret) []string {
	if s == nil {
		return nil
	}
	var out []string
	for k := range s.Data {
		out = append(out, k)
	}
	return out
}

// The FluxInstance krops renders, for both kinds of sync.
func TestInstance(t *testing.T) {
	gh := Instance(Options{Namespace: "flux-system", PATSecret: "flux-github-pat", Sync: Sync{Kind: SyncGitHub, URL: "https://github.com/o/r", Ref: "refs/heads/main", Path: "mgmt/aws"}})
	sync := gh.Object["spec"].(map[string]any)["sync"].(map[string]any)
	if sync["kind"] != "GitRepository" || sync["pullSecret"] != "flux-github-pat" || sync["ref"] != "refs/heads/main" || sync["path"] != "mgmt/aws" {
		t.Errorf("github sync: %v", sync)
	}
	oci := Instance(Options{Namespace: "flux-system", Sync: Sync{Kind: SyncOCI, URL: "oci://krops-registry:5000/krops", Ref: "latest", Path: "mgmt/local-host", Insecure: true}})
	spec := oci.Object["spec"].(map[string]any)
	if spec["sync"].(map[string]any)["kind"] != "OCIRepository" || spec["kustomize"] == nil {
		t.Errorf("oci sync: %v", spec)
	}
	if _, ok := spec["sync"].(map[string]any)["pullSecret"]; ok {
		t.Error("the OCI sync must not name a pull secret")
	}
	// The controllers come from upstream unless the run names a registry.
	for reg, want := range map[string]string{"": "ghcr.io/fluxcd", "localhost:5001/fluxcd": "localhost:5001/fluxcd"} {
		d := Instance(Options{Namespace: "flux-system", FluxRegistry: reg, Sync: Sync{Kind: SyncOCI}}).Object["spec"].(map[string]any)["distribution"].(map[string]any)
		if d["registry"] != want {
			t.Errorf("FluxRegistry %q: distribution %v, want registry %s", reg, d, want)
		}
	}
}
