package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// CreateYAML creates the object in doc (one YAML document) and returns it.
func (c *Cluster) CreateYAML(t testing.TB, ctx context.Context, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, u); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return u
}

// Condition reads condition typ of u: its status, message, and the
// generation it was observed for (0 when the condition does not say).
func Condition(u *unstructured.Unstructured, typ string) (status, message string, observed int64) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		status, _ = m["status"].(string)
		message, _ = m["message"].(string)
		if r, _ := m["reason"].(string); r != "" {
			message = strings.TrimSpace(r + ": " + message)
		}
		switch g := m["observedGeneration"].(type) {
		case int64:
			observed = g
		case float64:
			observed = int64(g)
		}
		return status, message, observed
	}
	return "", "no " + typ + " condition yet", 0
}

// Wait says what WaitFor waits for.
type Wait struct {
	// Condition is the condition type that must be True; default Ready.
	Condition string
	// Current requires the condition to speak for the object's latest
	// generation, and fails at once when it is False for it (the
	// controller finished with that spec and refused it).
	Current bool
	// Logs, when set, is printed when the wait fails (a controller's log).
	Logs func() string
}

// WaitFor polls the object until its condition is True, and returns it. It
// fails t when ctx ends first, with the condition's last message.
func (c *Cluster) WaitFor(t testing.TB, ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, w Wait) *unstructured.Unstructured {
	t.Helper()
	cond := w.Condition
	if cond == "" {
		cond = "Ready"
	}
	last := "not found"
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Client.Get(ctx, key, u); err == nil {
			status, msg, observed := Condition(u, cond)
			current := !w.Current || observed == u.GetGeneration()
			if status == "True" && current {
				return u
			}
			if status == "False" && w.Current && current {
				t.Fatalf("%s %s: %s is False: %s%s", gvk.Kind, key, cond, msg, logsOf(w))
			}
			last = fmt.Sprintf("%s=%s %s", cond, status, msg)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s: %s is not True: %s%s", gvk.Kind, key, cond, last, logsOf(w))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func logsOf(w Wait) string {
	if w.Logs == nil {
		return ""
	}
	return "\n" + w.Logs()
}

// Tail returns the last n lines the named controller printed, headed by
// its name, for failure messages.
func (cs *Controllers) Tail(name string, n int) string {
	lines := strings.Split(cs.Logs(name), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- " + name + " ---\n" + strings.Join(lines, "\n")
}

// StandInCRDs installs, for every kind in gvks the API server does not know,
// a stand-in CRD that accepts any content (namespaced, plural = lower-case
// kind + s), so objects of kinds whose real CRDs are not available can still
// be created. It returns the kinds it stood in for; their schema is checked
// by nothing.
func (c *Cluster) StandInCRDs(t testing.TB, ctx context.Context, gvks []schema.GroupVersionKind) []string {
	t.Helper()
	mapper := c.Client.RESTMapper()
	seen := map[schema.GroupVersionKind]bool{}
	var kinds []string
	for _, gvk := range gvks {
		if seen[gvk] || gvk.Kind == "" {
			continue
		}
		seen[gvk] = true
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		plural := strings.ToLower(gvk.Kind) + "s"
		if strings.HasSuffix(plural, "ys") && !strings.HasSuffix(plural, "ays") {
			plural = strings.TrimSuffix(plural, "ys") + "ies"
		}
		c.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
spec:
  group: %[2]s
  scope: Namespaced
  names: {kind: %[3]s, plural: %[1]s, listKind: %[3]sList, singular: %[4]s}
  versions:
  - name: %[5]s
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, gvk.Group, gvk.Kind, strings.ToLower(gvk.Kind), gvk.Version))
		kinds = append(kinds, gvk.Kind+" ("+gvk.GroupVersion().String()+")")
	}
	sort.Strings(kinds)
	return kinds
}

// CreateRunMetadata creates the run metadata a seed writes (ConfigMap
// flux-system/krops-run) for runID, and the namespace when it is missing:
// the evidence that a run was seeded, and after a pivot that it moved.
func (c *Cluster) CreateRunMetadata(t testing.TB, ctx context.Context, runID string) {
	t.Helper()
	c.CreateRunMetadataFor(t, ctx, runID, "")
}

// CreateRunMetadataFor is CreateRunMetadata labelled with environment (the
// krops.io/environment label krops-flux-seed writes); "" leaves the label
// out, as krops before the label wrote it.
func (c *Cluster) CreateRunMetadataFor(t testing.TB, ctx context.Context, runID, environment string) {
	t.Helper()
	labels := ""
	if environment != "" {
		labels = "\n  labels: {krops.io/environment: " + environment + "}"
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("flux-system")
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace flux-system: %v", err)
	}
	c.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: krops-run
  namespace: flux-system%s
data:
  KROPS_RUN_ID: %s
  KROPS_REVISION: main@sha1:0000000000000000000000000000000000000001
  KROPS_EXPIRES_AT: never
  KROPS_RUN_KIND: bootstrap
`, labels, runID))
}
