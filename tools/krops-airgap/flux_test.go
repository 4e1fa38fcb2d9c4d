package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

// The repository's air-gap Flux root, reconciled by the real Flux
// source-controller and kustomize-controller: krops-airgap pushes the config
// artifact to a real registry, Flux pulls it, builds airgap/config and every
// Kustomization it names, and applies the local-host ClusterClasses,
// Clusters and CNI resources into a real kube-apiserver with the Cluster API
// CRDs. What is not here: the Cluster API controllers, so the clusters are
// applied, not provisioned.
func TestFluxReconcilesTheAirGapRoot(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxSource, testenv.FluxKustomize, testenv.CAPICore, testenv.CAPD}})
	flux := testenv.Flux(t, cluster)
	reg := testenv.Registry(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, ".", "krops-airgap")
	repo := reg.Host + "/kropsdev/krops-config"
	r := testenv.RunBinary(t, root, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, bin, "config", "--push", "--revision", "main@sha1:0000000000000000000000000000000000000001", repo+":local-host")
	if r.Code != 0 {
		t.Fatalf("krops-airgap config: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// What the air-gap FluxInstance's sync creates, pointed at this registry.
	cluster.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  url: oci://%s
  ref:
    tag: local-host
  insecure: true
`, repo))
	cluster.CreateYAML(t, ctx, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  retryInterval: 10s
  timeout: 1m
  prune: true
  path: ./airgap/config
  sourceRef:
    kind: OCIRepository
    name: flux-system
`)
	ks := schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	for _, name := range []string{"flux-system", "clusterclasses", "clusters", "cni"} {
		key := client.ObjectKey{Namespace: "flux-system", Name: name}
		u := cluster.WaitFor(t, ctx, ks, key, testenv.Wait{Logs: func() string { return flux.Tail("kustomize-controller", 40) }})
		rev, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		// Ready and the applied revision can reach the API in separate
		// status writes (CI saw Ready first once): give the revision the
		// same deadline.
		for rev == "" && ctx.Err() == nil {
			time.Sleep(250 * time.Millisecond)
			if err := cluster.Client.Get(ctx, key, u); err == nil {
				rev, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
			}
		}
		if !strings.HasPrefix(rev, "local-host@sha256:") {
			t.Errorf("Kustomization %s applied revision %q, want the pushed artifact", name, rev)
		}
	}
	for _, o := range []struct {
		gvk       schema.GroupVersionKind
		namespace string
		name      string
	}{
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}, "default", "local-management"},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterClass"}, "default", "local-workload"},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}, "default", "local-management"},
		{schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}, "default", "local-workload"},
		{schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"}, "default", "kindnet"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.gvk)
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, u); err != nil {
			t.Errorf("%s %s/%s was not applied: %v", o.gvk.Kind, o.namespace, o.name, err)
			continue
		}
		// No krops-run ConfigMap exists here: the run tags must have fallen
		// back to their defaults, not stayed ${...} text.
		if o.gvk.Kind == "Cluster" {
			if got := u.GetLabels()["krops.io/run-id"]; got != "unknown" {
				t.Errorf("Cluster %s label krops.io/run-id = %q, want the default %q", o.name, got, "unknown")
			}
		}
	}
}
