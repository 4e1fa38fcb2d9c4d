package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/kit/testenv"
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
		waitForReady(t, ctx, cluster.Client, u.GroupVersionKind(), u.GetNamespace(), u.GetName(), operator, "flux-operator")
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

func waitForReady(t *testing.T, ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, name string, ctrls *testenv.Controllers, logOf string) {
	t.Helper()
	last := ""
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err == nil {
			status, msg := readyCondition(u)
			if status == "True" {
				return
			}
			last = status + " " + msg
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s/%s not ready: %s\n--- %s ---\n%s", gvk.Kind, namespace, name, last, logOf, tailLines(ctrls.Logs(logOf), 30))
		case <-time.After(250 * time.Millisecond):
		}
	}
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
		u := &unstructured.Unstructured{Object: deepCopy(t, o.Raw)}
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
			current.Object["spec"] = u.Object["spec"]
			if err := cluster.Client.Update(ctx, current); err != nil {
				t.Fatalf("%s: %v", o.String(), err)
			}
		}
		current = waitForGeneration(t, ctx, cluster.Client, u, operator)
		rev, _, _ := unstructured.NestedString(current.Object, "status", "lastAppliedRevision")
		t.Logf("%s rendered and applied: %s", o.String(), rev)
	}
	if len(seen) < 3 {
		t.Fatalf("found %d distinct FluxInstances; the trees have at least 3", len(seen))
	}
}

// waitForGeneration waits until the operator has reconciled the object's
// latest generation to Ready, and returns it.
func waitForGeneration(t *testing.T, ctx context.Context, c client.Client, obj *unstructured.Unstructured, ctrls *testenv.Controllers) *unstructured.Unstructured {
	t.Helper()
	last := ""
	for {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err == nil {
			status, msg := readyCondition(got)
			observed := readyGeneration(got)
			if observed == got.GetGeneration() && status == "True" {
				return got
			}
			if observed == got.GetGeneration() && status == "False" {
				t.Fatalf("%s %s failed: %s", obj.GetKind(), obj.GetName(), msg)
			}
			last = fmt.Sprintf("generation %d, observed %d, Ready=%s %s", got.GetGeneration(), observed, status, msg)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s not reconciled: %s\n--- flux-operator ---\n%s", obj.GetKind(), obj.GetName(), last, tailLines(ctrls.Logs("flux-operator"), 30))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readyGeneration is the generation the Ready condition speaks for.
func readyGeneration(u *unstructured.Unstructured) int64 {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			switch g := m["observedGeneration"].(type) {
			case int64:
				return g
			case float64:
				return int64(g)
			}
		}
	}
	return 0
}
