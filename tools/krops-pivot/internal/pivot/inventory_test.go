package pivot

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestInventoryProblems(t *testing.T) {
	inv := func(kv ...string) map[string]inventoryEntry {
		m := map[string]inventoryEntry{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = inventoryEntry{Key: kv[i], Version: kv[i+1]}
		}
		return m
	}
	source := inv("CoreProvider/cluster-api", "v1.14.2", "InfrastructureProvider/docker", "v1.14.2", "AddonProvider/helm", "v0.5.0")
	got := InventoryProblems(source, inv("CoreProvider/cluster-api", "v1.15.0", "InfrastructureProvider/docker", "v1.14.1", "BootstrapProvider/kubeadm", "v1.14.2"))
	want := []string{
		"AddonProvider/helm v0.5.0 is not installed on the management cluster",
		"InfrastructureProvider/docker is at v1.14.1 on the management cluster, older than v1.14.2 on kind",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Newer or equal on the target, and extra providers there, are fine.
	if p := InventoryProblems(source, inv("CoreProvider/cluster-api", "v1.14.2", "InfrastructureProvider/docker", "v1.14.3", "AddonProvider/helm", "v0.5.0", "IPAMProvider/in-cluster", "v1.0.0")); len(p) != 0 {
		t.Errorf("unexpected problems: %v", p)
	}
	if p := InventoryProblems(inv("CoreProvider/cluster-api", "main"), inv("CoreProvider/cluster-api", "dev")); len(p) != 1 || !strings.Contains(p[0], "cannot be compared") {
		t.Errorf("unparsable versions: %v", p)
	}
}

func TestForeignPaused(t *testing.T) {
	if got := foreignPaused([]string{"a", "b", "c"}, []string{"b"}); strings.Join(got, ",") != "a,c" {
		t.Errorf("got %v", got)
	}
}

func TestInventoryReadsClusterctlAndOperator(t *testing.T) {
	scheme := runtime.NewScheme()
	listKinds := map[schema.GroupVersionResource]string{clusterctlInventoryGVR: "ProviderList"}
	for _, op := range operatorProviders {
		listKinds[schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: op.resource}] = op.typ + "List"
	}
	obj := func(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}}
		for k, v := range fields {
			u.Object[k] = v
		}
		return u
	}
	installed := func(v string) map[string]any { return map[string]any{"status": map[string]any{"installedVersion": v}} }
	dyn := fake.NewSimpleDynamicClientWithCustomListKinds(scheme, listKinds,
		// clusterctl init's record, and one the operator also names.
		obj("clusterctl.cluster.x-k8s.io/v1alpha3", "Provider", "caaph-system", "addon-helm", map[string]any{"type": "AddonProvider", "providerName": "helm", "version": "v0.5.0"}),
		obj("clusterctl.cluster.x-k8s.io/v1alpha3", "Provider", "capi-system", "cluster-api", map[string]any{"type": "CoreProvider", "providerName": "cluster-api", "version": "v1.13.0"}),
		obj("operator.cluster.x-k8s.io/v1alpha2", "CoreProvider", "capi-system", "cluster-api", installed("v1.14.2")),
		obj("operator.cluster.x-k8s.io/v1alpha2", "InfrastructureProvider", "capd-system", "docker", installed("v1.14.2")),
		// Declared but not installed yet: no record.
		obj("operator.cluster.x-k8s.io/v1alpha2", "BootstrapProvider", "capi-kubeadm-bootstrap-system", "kubeadm", nil),
	)
	// A cluster that does not serve the IPAM providers: nothing from there.
	dyn.PrependReactor("list", "ipamproviders", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "operator.cluster.x-k8s.io", Resource: "ipamproviders"}, "")
	})
	got, err := inventory(context.Background(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]inventoryEntry{
		"AddonProvider/helm":            {Key: "AddonProvider/helm", Version: "v0.5.0"},
		"CoreProvider/cluster-api":      {Key: "CoreProvider/cluster-api", Version: "v1.14.2"},
		"InfrastructureProvider/docker": {Key: "InfrastructureProvider/docker", Version: "v1.14.2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inventory:\n got %v\nwant %v", got, want)
	}

	// Any other failure leaves the state unknown.
	dyn.PrependReactor("list", "coreproviders", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	if _, err := inventory(context.Background(), dyn); !errors.Is(err, ErrUnknownState) || !strings.Contains(err.Error(), "coreproviders.operator.cluster.x-k8s.io") {
		t.Errorf("a failed list: %v", err)
	}
}
