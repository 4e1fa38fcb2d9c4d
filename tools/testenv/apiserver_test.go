package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/plugins/sdk/procfs"
)

func TestAPIServerReportsThePinnedVersion(t *testing.T) {
	c := APIServer(t, ClusterOptions{})
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %s, want v1.37.2 (tools/testbin/apiserver/go.mod)", v.GitVersion)
	}
	// The kubeconfig file works on its own, through its named context.
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "via-kubeconfig"}}
	if err := kc.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(c.Kubeconfig)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, %v: want 0600, it holds a client key", st.Mode(), err)
	}
}

func TestCRDInstallsServesItsKindAndUpdatesStatus(t *testing.T) {
	c := APIServer(t, ClusterOptions{CRDs: []CRDSet{CAPICore}})
	ctx := context.Background()
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cluster.SetKind("Cluster")
	cluster.SetNamespace("default")
	cluster.SetName("local-management")
	cluster.Object["spec"] = map[string]any{"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []any{"192.168.0.0/16"}}}}
	if err := c.Client.Create(ctx, cluster); err != nil {
		t.Fatalf("creating a CAPI Cluster with the real CRD: %v", err)
	}
	ready := metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "StandIn", LastTransitionTime: metav1.Now()}
	if err := SetCondition(ctx, c.Client, cluster, ready); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cluster.GroupVersionKind())
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
		t.Fatal(err)
	}
	if s, _ := ConditionStatus(got, "Available"); s != "True" {
		t.Errorf("Available = %q after status update; object %v", s, got.Object["status"])
	}
	// A plain update does not touch status: the status subresource is real.
	got.SetLabels(map[string]string{"touched": "yes"})
	unstructured.RemoveNestedField(got.Object, "status")
	if err := c.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
		t.Fatal(err)
	}
	if s, _ := ConditionStatus(got, "Available"); s != "True" {
		t.Error("a spec update must not clear status when the CRD has a status subresource")
	}
}

func TestEveryPinnedCRDSetInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every pinned CRD set; run without -short")
	}
	c := APIServer(t, ClusterOptions{CRDs: AllCRDs()})
	for _, gvk := range []struct{ apiVersion, kind string }{
		{"cluster.x-k8s.io/v1beta2", "ClusterList"},
		{"infrastructure.cluster.x-k8s.io/v1beta2", "DockerClusterList"},
		{"operator.cluster.x-k8s.io/v1alpha2", "CoreProviderList"},
		{"infrastructure.cluster.x-k8s.io/v1beta2", "AWSClusterList"},
		{"infrastructure.cluster.x-k8s.io/v1beta1", "GCPClusterList"},
		{"cert-manager.io/v1", "CertificateList"},
		{"source.toolkit.fluxcd.io/v1", "OCIRepositoryList"},
		{"kustomize.toolkit.fluxcd.io/v1", "KustomizationList"},
		{"fluxcd.controlplane.io/v1", "FluxInstanceList"},
		{"fluxcd.controlplane.io/v1", "ResourceSetList"},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk.apiVersion)
		l.SetKind(gvk.kind)
		if err := c.Client.List(context.Background(), l); err != nil {
			t.Errorf("%s %s is not served: %v", gvk.apiVersion, gvk.kind, err)
		}
	}
}

func TestTwoAPIServersAtOnce(t *testing.T) {
	// APIServer must not skip from the goroutines below: a skip there ends
	// only that goroutine and leaves its cluster nil.
	Integration(t)
	if Testbin("KUBEBUILDER_ASSETS") == "" {
		MissingTestbin(t, "kube-apiserver and etcd (KUBEBUILDER_ASSETS)", HowToGetAPIServer)
	}
	var wg sync.WaitGroup
	clusters := make([]*Cluster, 2)
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i] = APIServer(t, ClusterOptions{Name: fmt.Sprintf("c%d", i)})
		}()
	}
	wg.Wait()
	if t.Failed() || clusters[0] == nil || clusters[1] == nil {
		t.Fatal("an API server did not start")
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a", Namespace: "default"}}
	if err := clusters[0].Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	err := clusters[1].Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if err == nil {
		t.Error("the two API servers share state")
	}
	if clusters[0].Config.Host == clusters[1].Config.Host {
		t.Error("the two API servers share an address")
	}
}

// TestAPIServerProcessesDieWithTheTestBinary starts a child test binary that
// holds an API server, SIGKILLs the child (as `go test -timeout` would end
// it, with no cleanup), and checks kube-apiserver and etcd go too.
func TestAPIServerProcessesDieWithTheTestBinary(t *testing.T) {
	Integration(t)
	if Testbin("KUBEBUILDER_ASSETS") == "" {
		MissingTestbin(t, "kube-apiserver and etcd (KUBEBUILDER_ASSETS)", HowToGetAPIServer)
	}
	if os.Getenv("KROPS_TESTENV_HOLD") == "1" {
		holdAPIServer(t) // this process is the child being killed
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAPIServerProcessesDieWithTheTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "KROPS_TESTENV_HOLD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "HOLDING "); ok {
			for _, f := range strings.Fields(rest) {
				n, _ := strconv.Atoi(f)
				pids = append(pids, n)
			}
			break
		}
	}
	if len(pids) == 0 {
		t.Fatal("the helper never reported its API server's processes")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for procfs.Alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d outlived the killed test binary", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// holdAPIServer starts an API server, reports its processes and waits to
// be killed.
func holdAPIServer(t *testing.T) {
	APIServer(t, ClusterOptions{})
	var pids []int
	for _, shim := range procfs.Children(os.Getpid()) {
		pids = append(pids, shim)
		pids = append(pids, procfs.Children(shim)...)
	}
	fmt.Printf("HOLDING %s\n", strings.Trim(fmt.Sprint(pids), "[]"))
	time.Sleep(time.Minute)
}
