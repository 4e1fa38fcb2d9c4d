package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// HowToGetClusterAPI is the hint shown when the Cluster API manager is missing.
const HowToGetClusterAPI = "run `tools/task.sh testbin` once (plain `go test` then finds the binaries), or set KROPS_CAPI_BIN to the directory tools/testbin/capi.sh prints"

// RunClusterAPI starts the Cluster API core manager (KROPS_CAPI_BIN, built
// by tools/testbin/capi.sh) against c with the ClusterTopology and MachinePool gates on, and
// stops it in t.Cleanup. c must be started with Webhooks and hold the
// CAPICore CRDs (and those of the providers the test uses).
//
// Two things clusterctl or the provider manifests would do are done here:
// the Cluster API CRDs get their contract labels, which is how the topology
// engine finds the API version of a provider kind, and the manager's
// admission webhooks are registered, pointing at its port on 127.0.0.1, so
// ClusterClasses and Clusters are defaulted and validated for real.
func RunClusterAPI(t testing.TB, c *Cluster) *Controllers {
	t.Helper()
	dir := ClusterAPIBin(t)
	if c.WebhookCertDir == "" {
		t.Fatal("RunClusterAPI needs a Cluster started with ClusterOptions.Webhooks")
	}
	ctx := context.Background()
	labelContracts(t, ctx, c)
	webhookPort := port(t)
	diagnostics := "127.0.0.1:" + strconv.Itoa(port(t))
	ctls := run(t, c, []controller{{name: "capi-manager", bin: filepath.Join(dir, "capi-manager"), args: func(h string) []string {
		return []string{"--leader-elect=false", "--health-addr=" + h, "--diagnostics-address=" + diagnostics, "--insecure-diagnostics",
			"--webhook-port=" + strconv.Itoa(webhookPort), "--webhook-cert-dir=" + c.WebhookCertDir,
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields", "--feature-gates=ClusterTopology=true,MachinePool=true", "--v=2"}
	}}})
	registerWebhooks(t, ctx, c, filepath.Join(dir, "webhooks.yaml"), "capi-", "https://127.0.0.1:"+strconv.Itoa(webhookPort))
	return ctls
}

// labelContracts gives every *.cluster.x-k8s.io CRD its contract labels
// (cluster.x-k8s.io/<contract>: <api versions>), as the providers' released
// manifests do: the ones the project's kustomization declares
// (contractLabels), and for CRDs of a set that declares none (the core's own
// kinds, which nothing looks up by contract) the versions they serve.
func labelContracts(t testing.TB, ctx context.Context, c *Cluster) {
	t.Helper()
	declared := map[string]map[string]string{}
	for _, set := range c.crdSets {
		m, err := contractLabels(set)
		if err != nil {
			t.Fatalf("contract labels: %v", err)
		}
		for name, labels := range m {
			declared[name] = labels
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := c.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		crd := &list.Items[i]
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		if !strings.HasSuffix(group, "cluster.x-k8s.io") {
			continue
		}
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		if own, ok := declared[crd.GetName()]; ok {
			for k, v := range own {
				labels[k] = v
			}
		} else {
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			for _, v := range versions {
				m, _ := v.(map[string]any)
				name, _ := m["name"].(string)
				if served, _ := m["served"].(bool); served && (name == "v1beta1" || name == "v1beta2") {
					labels["cluster.x-k8s.io/"+name] = name
				}
			}
		}
		crd.SetLabels(labels)
		if err := c.Client.Update(ctx, crd); err != nil {
			t.Fatalf("labelling CRD %s: %v", crd.GetName(), err)
		}
	}
}

// registerWebhooks creates the webhook configurations in file, renamed with
// prefix and pointed at base (https://host:port) instead of a Service.
func registerWebhooks(t testing.TB, ctx context.Context, c *Cluster, file, prefix, base string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString(c.WebhookCAData)
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetName(prefix + u.GetName())
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for i, h := range hooks {
			m := h.(map[string]any)
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			m["clientConfig"] = map[string]any{"url": base + path, "caBundle": ca}
			hooks[i] = m
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, u); err != nil {
			t.Fatalf("registering %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// ClusterAPIBin is the directory tools/testbin/capi.sh built (KROPS_CAPI_BIN):
// capi-manager, its webhooks.yaml, and clusterctl.
func ClusterAPIBin(t testing.TB) string {
	t.Helper()
	return binDir(t, "KROPS_CAPI_BIN", "the Cluster API manager", HowToGetClusterAPI)
}

// LabelForMove marks the Cluster API CRDs on c the way the providers'
// released manifests do (clusterctl.cluster.x-k8s.io and the owning
// provider), so clusterctl's move discovers their objects.
func LabelForMove(t testing.TB, ctx context.Context, c *Cluster) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := c.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{
		"cluster.x-k8s.io": "cluster-api", "addons.cluster.x-k8s.io": "cluster-api", "bootstrap.cluster.x-k8s.io": "bootstrap-kubeadm",
		"controlplane.cluster.x-k8s.io": "control-plane-kubeadm", "infrastructure.cluster.x-k8s.io": "infrastructure-docker",
	}
	for i := range list.Items {
		crd := &list.Items[i]
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		owner, ok := owners[group]
		if !ok {
			continue
		}
		labels := crd.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["clusterctl.cluster.x-k8s.io"] = ""
		labels["cluster.x-k8s.io/provider"] = owner
		crd.SetLabels(labels)
		if err := c.Client.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
}

// RunClusterAPIStack starts the Cluster API managers a cluster's whole
// lifecycle needs, as real processes against c: core, kubeadm bootstrap,
// kubeadm control plane, and CAPD with its in-memory backend (no Docker: a
// DevCluster with backend.inMemory gets a fake API server and etcd inside
// CAPD, which the real KCP and ClusterCache talk to on 127.0.0.1:20000+).
// c must be started with Webhooks and the CAPICore and CAPD CRDs. Every
// manager's defaulting and validating webhooks are registered.
//
// CAPD binds a fixed debug port (:19000), so one CAPD runs per machine at a
// time: the stack takes a machine-wide lock, held until t's cleanup (tests
// in other packages that need it wait their turn).
func RunClusterAPIStack(t testing.TB, c *Cluster) *Controllers {
	t.Helper()
	dir := ClusterAPIBin(t)
	for _, b := range []string{"kubeadm-bootstrap-manager", "kubeadm-control-plane-manager", "capd-manager"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			MissingTestbin(t, "the Cluster API "+b+" ("+dir+")", HowToGetClusterAPI)
		}
	}
	if c.WebhookCertDir == "" {
		t.Fatal("RunClusterAPIStack needs a Cluster started with ClusterOptions.Webhooks")
	}
	release := holdCAPDLock(t)
	ctx := context.Background()
	labelContracts(t, ctx, c)
	type component struct{ name, bin, webhooks, prefix string }
	comps := []component{
		{"capi-manager", "capi-manager", "webhooks.yaml", "capi-"},
		{"kubeadm-bootstrap", "kubeadm-bootstrap-manager", "kubeadm-bootstrap-webhooks.yaml", "capi-kubeadm-bootstrap-"},
		{"kubeadm-control-plane", "kubeadm-control-plane-manager", "kubeadm-control-plane-webhooks.yaml", "capi-kubeadm-control-plane-"},
		{"capd", "capd-manager", "capd-webhooks.yaml", "capd-"},
	}
	ports := map[string]int{}
	var ctrls []controller
	for _, comp := range comps {
		webhookPort := port(t)
		ports[comp.name] = webhookPort
		diagnostics := "127.0.0.1:" + strconv.Itoa(port(t))
		args := []string{"--leader-elect=false", "--diagnostics-address=" + diagnostics, "--insecure-diagnostics",
			"--webhook-port=" + strconv.Itoa(webhookPort), "--webhook-cert-dir=" + c.WebhookCertDir,
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields", "--v=2"}
		switch comp.name {
		case "capi-manager":
			args = append(args, "--feature-gates=ClusterTopology=true,MachinePool=true")
		case "kubeadm-control-plane", "capd":
			// As mgmt/local-host/capi-providers enables it: ClusterClass
			// templates are refused by their webhooks without it.
			args = append(args, "--feature-gates=ClusterTopology=true")
		}
		ctl := controller{name: comp.name, bin: filepath.Join(dir, comp.bin), args: func(h string) []string {
			return append([]string{"--health-addr=" + h}, args...)
		}}
		if comp.name == "capd" {
			// The in-memory backend's fake API servers listen on this address.
			ctl.env = []string{"POD_IP=127.0.0.1"}
		}
		ctrls = append(ctrls, ctl)
	}
	cs := run(t, c, ctrls)
	cs.afterStop = release
	for _, comp := range comps {
		registerWebhooks(t, ctx, c, filepath.Join(dir, comp.webhooks), comp.prefix, "https://127.0.0.1:"+strconv.Itoa(ports[comp.name]))
	}
	return cs
}

// capdHolder is what the CAPD lock file records of the test holding it.
type capdHolder struct {
	PID   int       `json:"pid"`
	Run   string    `json:"run"`
	Test  string    `json:"test"`
	Since time.Time `json:"since"`
}

// testRun names the run a test binary belongs to: tools/scripts/test.sh
// sets KROPS_TEST_RUN for every go test it starts; otherwise the binary's
// parent, the go test command.
func testRun() string {
	if r := os.Getenv("KROPS_TEST_RUN"); r != "" {
		return r
	}
	return "go-test-" + strconv.Itoa(os.Getppid())
}

// Waits for the CAPD lock: a test of the same run may hold it for minutes
// (the lifecycle test holds it through a pivot), but a holder from another
// run is a leftover, or a second run on the same machine, and waiting for
// it would only time the run out.
const (
	capdWaitSameRun  = 20 * time.Minute
	capdWaitOtherRun = 10 * time.Second
)

// holdCAPDLock takes the machine-wide CAPD lock, waiting for it while a
// test of the same run holds it, and returns its release; t's cleanup
// releases it too (at most once). A holder from another run, or one that
// holds it too long, fails t naming the holder.
func holdCAPDLock(t testing.TB) func() {
	t.Helper()
	f, err := lockExclusive(filepath.Join(os.TempDir(), "krops-testenv-capd.lock"), capdHolder{PID: os.Getpid(), Run: testRun(), Test: t.Name()}, capdWaitOtherRun, capdWaitSameRun, t.Logf)
	if err != nil {
		t.Fatalf("CAPD's machine-wide lock: %v", err)
	}
	release := unlockOnce(f)
	// Registered before run's cleanup, so it runs after CAPD has stopped.
	t.Cleanup(release)
	return release
}

// lockExclusive takes an exclusive flock on path for me and records me in
// the file. While another process holds it, it waits up to sameRun when the
// holder is of my run, and up to otherRun when it is not; then it gives up,
// naming the holder.
func lockExclusive(path string, me capdHolder, otherRun, sameRun time.Duration, logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		var h capdHolder
		b, _ := os.ReadFile(path)
		_ = json.Unmarshal(b, &h)
		holder := fmt.Sprintf("pid %d (%s, run %s, since %s)", h.PID, h.Test, h.Run, h.Since.Format(time.RFC3339))
		waited := time.Since(start)
		switch {
		case h.Run != me.Run && waited > otherRun:
			f.Close()
			return nil, fmt.Errorf("%s is held by %s, which is not part of this test run (%s): another run, or a leftover test process; stop it (kill %d) and rerun", path, holder, me.Run, h.PID)
		case waited > sameRun:
			f.Close()
			return nil, fmt.Errorf("%s is still held by %s after %s", path, holder, waited.Round(time.Second))
		case !logged:
			logf("waiting for %s, held by %s", path, holder)
			logged = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	me.Since = time.Now()
	b, _ := json.Marshal(me)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(b, 0)
	}
	return f, nil
}
