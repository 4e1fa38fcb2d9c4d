package validate

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drone/envsubst/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

// validate renders ResourceSets itself so it can check what they create.
// This holds that rendering to the real Flux Operator: every ResourceSet of
// the trees is handed to the operator, and each object it creates must equal
// the one validate rendered, field for field in spec and in name.
func TestResourceSetsRenderAsTheFluxOperatorDoes(t *testing.T) {
	in := loadRepository(t)
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxOperator, testenv.FluxSource, testenv.FluxKustomize}})
	operator := testenv.RunFluxOperator(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	compared := 0
	for _, o := range in.Objects {
		api, kind := o.Kind()
		if kind != "ResourceSet" || !strings.HasPrefix(api, "fluxcd.controlplane.io/") {
			continue
		}
		ours, errs, notes := resourceSets([]Object{o})
		if len(errs) > 0 || len(notes) > 0 {
			t.Fatalf("%s: validate could not render it: %v %v", o.String(), errs, notes)
		}
		u := &unstructured.Unstructured{Object: deepCopy(t, o.Raw)}
		// The environments' ResourceSets share a name; one cluster holds all.
		u.SetName(u.GetName() + "-" + strings.ReplaceAll(o.Root, "/", "-"))
		if err := cluster.Client.Create(ctx, u); err != nil {
			t.Fatalf("%s: %v", o.String(), err)
		}
		cluster.WaitFor(t, ctx, u.GroupVersionKind(), client.ObjectKeyFromObject(u), testenv.Wait{Logs: func() string { return operator.Tail("flux-operator", 30) }})
		for _, want := range ours {
			got := &unstructured.Unstructured{}
			got.SetAPIVersion(want.Raw["apiVersion"].(string))
			got.SetKind(want.Raw["kind"].(string))
			md, _ := want.Raw["metadata"].(map[string]any)
			ns, _ := md["namespace"].(string)
			name, _ := md["name"].(string)
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
				t.Errorf("%s: validate rendered %s %s/%s, the operator created no such object: %v", o.String(), got.GetKind(), ns, name, err)
				continue
			}
			// The API server adds CRD defaults to what the operator created;
			// a dry run of validate's object under another name gets the same.
			defaulted := &unstructured.Unstructured{Object: deepCopy(t, want.Raw)}
			defaulted.SetName(name + "-validate")
			if err := cluster.Client.Create(ctx, defaulted, client.DryRunAll); err != nil {
				t.Errorf("%s: dry run of %s %s/%s: %v", o.String(), got.GetKind(), ns, name, err)
				continue
			}
			if !reflect.DeepEqual(got.Object["spec"], defaulted.Object["spec"]) {
				a, _ := json.MarshalIndent(got.Object["spec"], "", "  ")
				b, _ := json.MarshalIndent(defaulted.Object["spec"], "", "  ")
				t.Errorf("%s: %s %s/%s differs\noperator:\n%s\nvalidate:\n%s", o.String(), got.GetKind(), ns, name, a, b)
			}
			compared++
		}
	}
	if compared < 6 {
		t.Fatalf("compared %d rendered objects; the trees' ResourceSets should give at least 6", compared)
	}
	t.Logf("%d objects rendered by validate equal what the Flux Operator created", compared)
}

// deepCopy round-trips through JSON, so numbers and nesting compare the way
// the API server returns them.
func deepCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// substituteDefaults expands the object's ${VAR:=default} placeholders with
// the library kustomize-controller substitutes with, the way Flux builds them
// when the optional sources (the krops-sync ConfigMap) are absent: every
// variable falls back to its default. A placeholder without a default
// becomes empty, and the CRD's validation then names it.
func substituteDefaults(t *testing.T, o Object) map[string]any {
	t.Helper()
	b, err := json.Marshal(o.Raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := envsubst.Eval(string(b), func(string) string { return "" })
	if err != nil {
		t.Fatalf("%s: substitution: %v", o.String(), err)
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s: after substitution: %v", o.String(), err)
	}
	return m
}

// Every FluxInstance in the trees (the workload clusters', the air gap's,
// the one local-host delivers through a ClusterResourceSet) is handed to the
// real Flux Operator, one at a time, and must render: its distribution
// version must exist among the operator's built-in manifests, and its
// components, cluster settings, sync and patches must build. wait is turned
// off, because nothing here runs the Deployments it installs.
func TestFluxInstancesRenderWithTheFluxOperator(t *testing.T) {
	in := loadRepository(t)
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxOperator}})
	operator := testenv.RunFluxOperator(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	seen := map[string]bool{}
	var current *unstructured.Unstructured
	for _, o := range in.Objects {
		api, kind := o.Kind()
		if kind != "FluxInstance" || !strings.HasPrefix(api, "fluxcd.controlplane.io/") {
			continue
		}
		// The same instance is built by several roots (shared directories).
		spec, _ := json.Marshal(o.Raw["spec"])
		if seen[string(spec)] {
			continue
		}
		seen[string(spec)] = true
		u := &unstructured.Unstructured{Object: substituteDefaults(t, o)}
		if err := unstructured.SetNestedField(u.Object, false, "spec", "wait"); err != nil {
			t.Fatal(err)
		}
		// One instance per cluster: the next instance replaces the spec of
		// the first (uninstalling in between takes the operator a minute).
		if current == nil {
			if err := cluster.Client.Create(ctx, u); err != nil {
				t.Fatalf("%s: %v", o.String(), err)
			}
		} else {
			// The operator keeps writing the object (finalizers, status),
			// so the spec goes onto the latest version it left.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				latest := current.DeepCopy()
				if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(current), latest); err != nil {
					return err
				}
				latest.Object["spec"] = u.Object["spec"]
				return cluster.Client.Update(ctx, latest)
			})
			if err != nil {
				t.Fatalf("%s: %v", o.String(), err)
			}
		}
		current = cluster.WaitFor(t, ctx, u.GroupVersionKind(), client.ObjectKeyFromObject(u),
			testenv.Wait{Current: true, Logs: func() string { return operator.Tail("flux-operator", 30) }})
		rev, _, _ := unstructured.NestedString(current.Object, "status", "lastAppliedRevision")
		t.Logf("%s rendered and applied: %s", o.String(), rev)
	}
	if len(seen) < 3 {
		t.Fatalf("found %d distinct FluxInstances; the trees have at least 3", len(seen))
	}
}
