package validate

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/testenv"
)

var placeholderDefault = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:[=-]([^}]*)\}`)

var clusterRoots = regexp.MustCompile(`^mgmt/[^/]+/clusters$|^mgmt/local-host/clusterclasses$`)

// The clusters of every environment, handed to the real Cluster API core
// manager with its admission webhooks and the ClusterTopology and
// MachinePool gates: the webhooks must accept every object (ClusterClass
// patches and variables, each Cluster's topology against its class, the
// MachinePools), and the topology engine must reconcile each local-host
// Cluster from its class into a control plane at the Cluster's version. The
// providers that would then provision machines do not run here; provider
// kinds without a CRD here get a stand-in CRD.
func TestClustersWithRealClusterAPI(t *testing.T) {
	in := loadRepository(t)
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.CAPICore, testenv.CAPD, testenv.CAPA, testenv.CAPG}, Webhooks: true})
	capi := testenv.RunClusterAPI(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var chosen []Object
	for _, o := range in.Objects {
		// mgmt/local-host-e2e's Clusters are local-host's, byte for byte
		// (tools/e2e checks it), under the same names: tools/e2e provisions
		// them from its in-memory classes with the whole real stack.
		if clusterRoots.MatchString(o.Root) && !strings.HasPrefix(o.Root, "mgmt/local-host-e2e/") {
			chosen = append(chosen, o)
		}
	}
	cluster.StandInCRDs(t, ctx, kinds(chosen))
	var clusters, others []*unstructured.Unstructured
	var topology []*unstructured.Unstructured
	for _, o := range chosen {
		b, err := yaml.Marshal(o.Raw)
		if err != nil {
			t.Fatal(err)
		}
		// What Flux's substitution does with the docker provider's
		// cluster-vars (the mirrors, a list), and with defaults for the rest.
		b = bytes.ReplaceAll(b, []byte("${KROPS_REGISTRY_MIRRORS:=[]}"), []byte(testMirrors))
		b = placeholderDefault.ReplaceAll(b, []byte("$1"))
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		switch {
		case u.GetKind() == "Cluster" && o.Root == "mgmt/local-host/clusters":
			topology = append(topology, u)
			clusters = append(clusters, u)
		case u.GetKind() == "Cluster":
			clusters = append(clusters, u)
		default:
			others = append(others, u)
		}
	}
	if len(clusters) < 8 || len(topology) != 2 {
		t.Fatalf("found %d Clusters (%d with a topology) in the trees", len(clusters), len(topology))
	}
	for _, u := range append(others, clusters...) {
		if err := cluster.Client.Create(ctx, u); err != nil {
			t.Errorf("Cluster API refused %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("Cluster API accepted %d Clusters and %d other objects", len(clusters), len(others))
	for _, u := range topology {
		cluster.WaitFor(t, ctx, u.GroupVersionKind(), client.ObjectKeyFromObject(u),
			testenv.Wait{Condition: "TopologyReconciled", Logs: func() string { return capi.Tail("capi-manager", 40) }})
	}
	kcps := &unstructured.UnstructuredList{}
	kcps.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneList"})
	if err := cluster.Client.List(ctx, kcps, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, k := range kcps.Items {
		v, _, _ := unstructured.NestedString(k.Object, "spec", "version")
		owners[k.GetLabels()["cluster.x-k8s.io/cluster-name"]] = v
	}
	// Only the local-host classes have the registry-mirrors patch.
	mirrored := map[string]bool{}
	local := func(u unstructured.Unstructured) bool {
		for _, c := range topology {
			if c.GetName() == u.GetLabels()["cluster.x-k8s.io/cluster-name"] {
				return true
			}
		}
		return false
	}
	for _, k := range kcps.Items {
		if !local(k) {
			continue
		}
		spec, _, _ := unstructured.NestedMap(k.Object, "spec", "kubeadmConfigSpec")
		if checkMirrorFiles(t, "KubeadmControlPlane "+k.GetName(), spec) {
			mirrored[k.GetLabels()["cluster.x-k8s.io/cluster-name"]] = true
		}
	}
	workers := &unstructured.UnstructuredList{}
	workers.SetGroupVersionKind(schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplateList"})
	if err := cluster.Client.List(ctx, workers, client.InNamespace("default"), client.HasLabels{"cluster.x-k8s.io/cluster-name"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range workers.Items {
		if !local(k) {
			continue
		}
		spec, _, _ := unstructured.NestedMap(k.Object, "spec", "template", "spec")
		if !checkMirrorFiles(t, "KubeadmConfigTemplate "+k.GetName(), spec) {
			mirrored[k.GetLabels()["cluster.x-k8s.io/cluster-name"]] = false
		}
	}
	for _, u := range topology {
		if !mirrored[u.GetName()] {
			t.Errorf("Cluster %s: its control plane or workers did not get the registry mirrors (KubeadmControlPlanes: %d, worker templates: %d)", u.GetName(), len(kcps.Items), len(workers.Items))
		}
	}
	for _, u := range topology {
		want, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "version")
		if got, ok := owners[u.GetName()]; !ok || got != want {
			t.Errorf("Cluster %s: the topology made no KubeadmControlPlane at %s (control planes by cluster: %v)", u.GetName(), want, owners)
		}
	}
}

// testMirrors is KROPS_REGISTRY_MIRRORS as the docker provider writes it.
const testMirrors = `[{"registry":"localhost:5001","endpoints":["http://krops-registry:5000"]},` +
	`{"registry":"docker.io","endpoints":["https://hub-cache.example.com","http://krops-registry:5000"]}]`

// checkMirrorFiles checks what the local-host classes' registry-mirrors
// patch renders into a kubeadm config: a containerd hosts.toml per mirrored
// registry, with its endpoints in order and the registry as the server, and
// the command that points containerd at them. It reports whether the
// config was patched at all.
func checkMirrorFiles(t *testing.T, what string, spec map[string]any) bool {
	t.Helper()
	files, _, _ := unstructured.NestedSlice(spec, "files")
	cmds, _, _ := unstructured.NestedStringSlice(spec, "preKubeadmCommands")
	if len(files) == 0 && len(cmds) == 0 {
		return false
	}
	// What krops-kind writes on kind's node for the same mirrors, less its
	// comment line.
	kindWrites := func(m kindcfg.Mirror) string {
		f := kindcfg.HostsTOML(m)
		return f[strings.Index(f, "\n")+1:]
	}
	want := map[string]string{
		"/etc/containerd/certs.d/localhost:5001/hosts.toml": kindWrites(kindcfg.Mirror{Registry: "localhost:5001", Endpoints: []string{"http://krops-registry:5000"}}),
		"/etc/containerd/certs.d/docker.io/hosts.toml":      kindWrites(kindcfg.Mirror{Registry: "docker.io", Endpoints: []string{"https://hub-cache.example.com", "http://krops-registry:5000"}}),
	}
	if !strings.Contains(want["/etc/containerd/certs.d/docker.io/hosts.toml"], `server = "https://registry-1.docker.io"`) {
		t.Fatalf("kind's hosts.toml for docker.io: %q", want["/etc/containerd/certs.d/docker.io/hosts.toml"])
	}
	for _, f := range files {
		m, _ := f.(map[string]any)
		path, _ := m["path"].(string)
		content, _ := m["content"].(string)
		w, ok := want[path]
		if !ok || !strings.HasSuffix(content, w) || m["permissions"] != "0644" {
			t.Errorf("%s: file %s:\n%s\nwant it ending in:\n%s", what, path, content, w)
		}
		delete(want, path)
	}
	for path := range want {
		t.Errorf("%s: no file %s", what, path)
	}
	if len(cmds) != 1 || !strings.Contains(cmds[0], `config_path = "/etc/containerd/certs.d"`) || !strings.Contains(cmds[0], "systemctl restart containerd") {
		t.Errorf("%s: preKubeadmCommands %q do not point containerd at the hosts files", what, cmds)
	}
	return true
}
