//go:build realengine

package e2e_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drone/envsubst/v2"
	fluxenvsubst "github.com/fluxcd/pkg/envsubst"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/fluxbuild"
)

// capiProvider is one Cluster API provider as its module ships it: the
// kustomization its release manifests are built from, and the image the
// lane built for it (tools/realengine/images.sh).
type capiProvider struct {
	// metadata is the path of the release's metadata.yaml.
	module, config, metadata, namespace, image string
}

// capiLane is the Cluster API the lane runs on kind: the providers the
// local-host tree installs, at the version the testbin pins.
type capiLane struct {
	version   string
	providers []capiProvider
}

// The Cluster API images the lane pushes to the local registry, which the
// kind node reaches through its registry.k8s.io mirror.
const k8sMirror = "[[mirrors]]\nregistry = \"registry.k8s.io\"\nendpoints = [\"http://" + laneRegistryInNet + "\"]\n"

// newCAPILane finds the provider modules (tools/testbin/capi/go.mod) and
// checks that the lane built every image.
func newCAPILane(t *testing.T) *capiLane {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/cluster-api", "sigs.k8s.io/cluster-api/test")
	cmd.Dir = "../testbin/capi"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locating the Cluster API modules: %v", err)
	}
	dirs := map[string]string{}
	var version string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m struct{ Path, Version, Dir string }
		if err := dec.Decode(&m); err != nil || m.Dir == "" {
			t.Fatalf("go mod download: %v\n%s", err, out)
		}
		dirs[m.Path], version = m.Dir, m.Version
	}
	l := &capiLane{version: version}
	image := func(name string) string { return "registry.k8s.io/cluster-api/" + name + ":" + version }
	// CAPD is released with the core (its infrastructure-components-
	// development.yaml), under the repository's one metadata.yaml.
	meta := filepath.Join(dirs["sigs.k8s.io/cluster-api"], "metadata.yaml")
	l.providers = []capiProvider{
		{dirs["sigs.k8s.io/cluster-api"], "core/config/default", meta, "capi-system", image("cluster-api-controller")},
		{dirs["sigs.k8s.io/cluster-api"], "bootstrap/kubeadm/config/default", meta, "capi-kubeadm-bootstrap-system", image("kubeadm-bootstrap-controller")},
		{dirs["sigs.k8s.io/cluster-api"], "controlplane/kubeadm/config/default", meta, "capi-kubeadm-control-plane-system", image("kubeadm-control-plane-controller")},
		{dirs["sigs.k8s.io/cluster-api/test"], "infrastructure/docker/config/default", meta, "capd-system", image("capd-manager")},
	}
	for _, img := range append(l.images(), capdLoadBalancer(t, dirs["sigs.k8s.io/cluster-api/test"])) {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			t.Fatalf("the image %s is missing: run tools/realengine/images.sh (`tools/task.sh e2e:real` does)", img)
		}
	}
	return l
}

func (l *capiLane) images() []string {
	var out []string
	for _, p := range l.providers {
		out = append(out, p.image)
	}
	return out
}

// pushToLaneRegistry pushes images to the lane's registry without their
// registry host (registry.k8s.io/x/y:v -> localhost:5001/x/y:v), where the
// node's [[mirrors]] for that host find them.
func pushToLaneRegistry(t *testing.T, images []string) {
	t.Helper()
	for _, img := range images {
		pushed := "localhost:5001/" + img[strings.Index(img, "/")+1:]
		engine(t, "tag", img, pushed)
		engine(t, "push", pushed)
		_ = exec.Command("docker", "rmi", pushed).Run()
	}
}

// capdLoadBalancer is the haproxy image CAPD starts for each cluster.
func capdLoadBalancer(t *testing.T, testModule string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testModule, "infrastructure/docker/internal/loadbalancer/const.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`DefaultImageTag = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no DefaultImageTag in CAPD's loadbalancer/const.go")
	}
	return "kindest/haproxy:" + string(m[1])
}

// expand substitutes ${VAR} and ${VAR:=default} as `clusterctl init`
// does (drone's envsubst, which also takes $VAR).
func expand(t *testing.T, in string, vars map[string]string) string {
	t.Helper()
	out, err := envsubst.Eval(in, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("substitution: %v", err)
	}
	return out
}

// fluxExpand substitutes as Flux's kustomize-controller does post-build
// (its fork of that library: only ${...}, so a ClusterClass template's $m
// stays as written).
func fluxExpand(t *testing.T, in string, vars map[string]string) string {
	t.Helper()
	out, err := fluxenvsubst.Eval(in, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("substitution: %v", err)
	}
	return out
}

// kustomizeBuild renders a kustomization directory to objects, as Flux
// builds it.
func kustomizeBuild(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return splitObjects(t, kustomizeYAML(t, dir))
}

// kustomizeYAML is the build as text, each value in the style its file
// gave it (Flux substitutes on this text, so a quoted placeholder stays a
// string).
func kustomizeYAML(t *testing.T, dir string) string {
	t.Helper()
	res, err := fluxbuild.Build(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func splitObjects(t *testing.T, docs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(docs, -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var o map[string]any
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// certIssuer STANDS IN for cert-manager, which the lane cannot build (the
// module proxy serves cert-manager's library module but not the modules of
// its controller, webhook and cainjector programs): it does at render time
// what cert-manager does in the cluster for the providers' manifests. Each
// Certificate becomes the kubernetes.io/tls Secret it names, signed by one
// CA, and every object annotated cert-manager.io/inject-ca-from gets that
// CA as its caBundle, as cainjector sets it. The Issuers and Certificates
// themselves are not applied.
type certIssuer struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newCertIssuer(t *testing.T) *certIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "krops real-engine lane CA (stand-in for cert-manager)"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &certIssuer{ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// secretFor issues the Certificate's serving certificate as its Secret.
func (c *certIssuer) secretFor(t *testing.T, cert map[string]any) map[string]any {
	t.Helper()
	spec, _ := cert["spec"].(map[string]any)
	ns := cert["metadata"].(map[string]any)["namespace"].(string)
	var names []string
	for _, n := range spec["dnsNames"].([]any) {
		names = append(names, n.(string))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": spec["secretName"], "namespace": ns, "labels": map[string]any{"krops.dev/stand-in": "cert-manager"}},
		"data": map[string]any{"tls.crt": b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			"tls.key": b64(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})), "ca.crt": b64(c.caPEM)}}
}

// inject sets the CA where cert-manager.io/inject-ca-from asks for it.
func (c *certIssuer) inject(o map[string]any) {
	ann, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
	if _, ok := ann["cert-manager.io/inject-ca-from"]; !ok {
		return
	}
	bundle := base64.StdEncoding.EncodeToString(c.caPEM)
	switch o["kind"] {
	case "CustomResourceDefinition":
		if conv, ok := o["spec"].(map[string]any)["conversion"].(map[string]any); ok {
			if wh, ok := conv["webhook"].(map[string]any); ok {
				if cc, ok := wh["clientConfig"].(map[string]any); ok {
					cc["caBundle"] = bundle
				}
			}
		}
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		for _, w := range o["webhooks"].([]any) {
			w.(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = bundle
		}
	}
}

// manifests renders the providers as `clusterctl init` would install them
// with the tree's feature gates (ClusterTopology on), their images the
// lane's, and cert-manager's part done by the stand-in issuer.
func (l *capiLane) manifests(t *testing.T) string {
	t.Helper()
	issuer := newCertIssuer(t)
	vars := map[string]string{"CLUSTER_TOPOLOGY": "true"}
	var docs []string
	for _, p := range l.providers {
		for _, o := range kustomizeBuild(t, filepath.Join(p.module, p.config)) {
			kind := o["kind"].(string)
			if api, _ := o["apiVersion"].(string); strings.HasPrefix(api, "cert-manager.io/") {
				if kind == "Certificate" {
					o = issuer.secretFor(t, o)
				} else {
					continue
				}
			}
			issuer.inject(o)
			if kind == "Deployment" {
				for _, c := range o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
					c := c.(map[string]any)
					if c["name"] == "manager" {
						c["image"], c["imagePullPolicy"] = p.image, "IfNotPresent"
					}
				}
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, expand(t, string(b), vars))
		}
	}
	return strings.Join(docs, "---\n")
}

// treeObjects renders the local-host tree's ClusterClasses, the
// local-management Cluster and the CNI's ClusterResourceSet as Flux's
// clusterclasses, clusters and addons Kustomizations do, substituting from
// vars (cluster-vars on the cluster, and KROPS_ENVIRONMENT as the clusters
// Kustomization sets it).
func treeObjects(t *testing.T, repo string, vars map[string]string) string {
	t.Helper()
	var docs []string
	var objs []map[string]any
	for _, dir := range []string{"clusterclasses", "clusters", "addons/cni"} {
		objs = append(objs, splitObjects(t, fluxExpand(t, kustomizeYAML(t, filepath.Join(repo, "mgmt/local-host", dir)), vars))...)
	}
	for _, o := range objs {
		if o["kind"] == "Cluster" && o["metadata"].(map[string]any)["name"] != "local-management" {
			continue // this test builds the management cluster only
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// podNetworkAcrossNodes checks the CNI the tree's ClusterResourceSet
// installed (kindnetd; in the lane its stand-in): CoreDNS becomes Ready
// (its pods reach the API server through the Service address), and each
// CoreDNS pod answers its health port from every node it does not run on,
// which works only when the nodes route each other's pod ranges.
func podNetworkAcrossNodes(t *testing.T, kubeconfig string) {
	t.Helper()
	kc := func(args ...string) (string, error) {
		out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	waitFor(t, "kindnetd on every node", 3*time.Minute, func() (bool, string) {
		out, err := kc("get", "daemonset", "kindnet", "-n", "kube-system", "-o", "jsonpath={.status.desiredNumberScheduled} {.status.numberReady}")
		f := strings.Fields(out)
		return err == nil && len(f) == 2 && f[0] == "2" && f[1] == "2", out
	})
	// CoreDNS started before the worker joined, so both pods run on the
	// control plane, and its anti-affinity is only a preference: rolled out
	// again with a required one (on a label only the new pods carry), one
	// pod runs on each node, and the checks below cross the nodes both ways.
	spread := `{"spec":{"template":{"metadata":{"labels":{"krops.dev/e2e-spread":"coredns"}},"spec":{"affinity":{"podAntiAffinity":{` +
		`"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"krops.dev/e2e-spread":"coredns"}},"topologyKey":"kubernetes.io/hostname"}]}}}}}}`
	if out, err := kc("patch", "-n", "kube-system", "deployment/coredns", "--type=strategic", "-p", spread); err != nil {
		t.Fatalf("spreading CoreDNS over the nodes: %v\n%s", err, out)
	}
	if out, err := kc("rollout", "status", "-n", "kube-system", "deployment/coredns", "--timeout=3m"); err != nil {
		t.Fatalf("CoreDNS on the management cluster: %v\n%s", err, out)
	}
	nodes, err := kc("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	if err != nil {
		t.Fatal(nodes)
	}
	// Until the replaced pods are gone the list holds them too.
	var pods string
	waitFor(t, "CoreDNS's old pods gone", 2*time.Minute, func() (bool, string) {
		out, err := kc("get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-dns", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP} {.metadata.deletionTimestamp}{"\n"}{end}`)
		pods = out
		lines := strings.Split(out, "\n")
		done := err == nil && len(lines) == 2
		for _, ln := range lines {
			done = done && len(strings.Fields(ln)) == 3
		}
		return done, out
	})
	checked := map[string]bool{}
	for _, p := range strings.Split(pods, "\n") {
		f := strings.Fields(p)
		if len(f) != 3 {
			t.Fatalf("CoreDNS pods: %q", pods)
		}
		for _, from := range strings.Split(nodes, "\n") {
			if from == f[1] {
				continue
			}
			// CAPD names the machine's container as the node.
			out, err := exec.Command("docker", "exec", from, "curl", "-sS", "--max-time", "5", "http://"+f[2]+":8080/health").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "OK" {
				t.Errorf("pod network: %s cannot reach %s on %s at %s: %v %s", from, f[0], f[1], f[2], err, out)
				continue
			}
			t.Logf("pod network: %s -> %s on %s (%s): %s", from, f[0], f[1], f[2], strings.TrimSpace(string(out)))
			checked[from] = true
		}
	}
	if len(checked) != 2 {
		t.Errorf("CoreDNS pods were reached across the nodes from %v only, want from both nodes (pods: %q)", slices.Sorted(maps.Keys(checked)), pods)
	}
}

// machinesPullThroughTheMirror checks that CAPD's machines got kind's
// registry mirrors (the docker provider's cluster-vars, the ClusterClasses'
// registry-mirrors patch): each machine pulls image, which only the lane's
// registry holds (the node image does not preload it, and nothing here
// reaches registry.k8s.io), through the mirror the test configured.
func machinesPullThroughTheMirror(t *testing.T, cluster, image string) {
	t.Helper()
	for _, c := range capdContainers(t, cluster) {
		name := strings.Fields(c)[0]
		if name == cluster+"-lb" {
			continue
		}
		hosts, err := exec.Command("docker", "exec", name, "cat", "/etc/containerd/certs.d/registry.k8s.io/hosts.toml").CombinedOutput()
		if err != nil || !strings.Contains(string(hosts), `[host."http://`+laneRegistryInNet+`"]`) {
			t.Errorf("%s: no registry.k8s.io mirror to %s: %v\n%s", name, laneRegistryInNet, err, hosts)
			continue
		}
		start := time.Now()
		out, err := exec.Command("docker", "exec", name, "crictl", "pull", image).CombinedOutput()
		if err != nil {
			t.Errorf("%s cannot pull %s through its mirror: %v\n%s", name, image, err, out)
			continue
		}
		t.Logf("%s pulled %s through its mirror in %v", name, image, time.Since(start).Round(time.Millisecond))
	}
}

// capdContainers lists the engine's containers of a CAPD cluster.
func capdContainers(t *testing.T, cluster string) []string {
	t.Helper()
	s := engine(t, "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+cluster, "--format", "{{.Names}} {{.Image}} {{.State}}")
	if s == "" {
		return nil
	}
	out := strings.Split(s, "\n")
	slices.Sort(out)
	return out
}

// waitFor polls check until it returns true or the timeout passes, and
// returns how long it took.
// newVolumes lists the engine's volumes that were not in before (the
// output of `docker volume ls -q`).
func newVolumes(t *testing.T, before string) []string {
	t.Helper()
	var out []string
	for _, v := range strings.Fields(engine(t, "volume", "ls", "-q")) {
		if !slices.Contains(strings.Fields(before), v) {
			out = append(out, v)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, timeout time.Duration, check func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		ok, state := check()
		if ok {
			return time.Since(start)
		}
		if state != last {
			t.Logf("%6s  %s: %s", time.Since(start).Round(time.Second), what, state)
			last = state
		}
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("%s: not within %v (last: %s)", what, timeout, last)
	return 0
}

// TestRealEngineCAPDBuildsTheManagementCluster is Cluster API on real kind
// nodes building the local-host tree's management cluster as real node
// containers on the engine: the core, kubeadm and CAPD managers run as pods
// from the lane's images (pulled by the node through its registry.k8s.io
// mirror), the tree's ClusterClasses and local-management Cluster go in as
// Flux substitutes them, with the node image the docker provider put in
// cluster-vars, and CAPD's machines boot from the lane's node image until
// the Cluster is Available and its nodes answer on the host through the
// load balancer's published port. Then the teardown users run deletes the
// Cluster, meeting a fault: kind's node (the controller host) is paused
// while the sweep waits for Cluster API, so it must stop with exit 3 and
// keep the host; once the node is back the rerun removes the Cluster's
// containers, kind and the registry, and a third run is a no-op. What is
// left is read from the engine and the kubeconfig.
//
// STAND-INS, named: cert-manager (certIssuer above); CAPD's load balancer
// image (Debian's haproxy, tools/realengine/images.sh); the node image's
// CNI (tools/realengine/nodeimage.sh). The providers are applied from
// their modules' kustomizations, not by the Cluster API operator from
// release manifests (the lifecycle test does that through Flux).
func TestRealEngineCAPDBuildsTheManagementCluster(t *testing.T) {
	r := newRealEnv(t)
	l := newCAPILane(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is missing: install it (the lane reads the clusters with it)")
	}
	const mgmt = "local-management"
	if l := append(leftovers(t, laneCluster), capdContainers(t, mgmt)...); len(l) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them (tear down with `tools/task.sh teardown ENV=local-host`)", l)
	}
	kubectl := func(args ...string) (string, error) { return r.kubectl(t, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range [][]string{{"get", "cluster,machine,kubeadmcontrolplane,dockermachine,dockercluster", "-A"}, {"get", "pods", "-A", "-o", "wide"},
				{"logs", "-n", "capd-system", "deploy/capd-controller-manager", "--tail=60"}, {"logs", "-n", "capi-system", "deploy/capi-controller-manager", "--tail=40"}} {
				out, _ := kubectl(q...)
				t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
			}
		}
		// Whatever the outcome, the engine keeps nothing of the run.
		_ = exec.Command("docker", "unpause", laneCluster+"-control-plane").Run()
		_, _ = kubectl("delete", "cluster", "--all", "-A", "--wait=true", "--timeout=3m")
		for _, c := range capdContainers(t, mgmt) {
			_ = exec.Command("docker", "rm", "-f", strings.Fields(c)[0]).Run()
		}
		_, _ = r.run(t, nil, "krops-sweep", "local-host")
	})
	node := os.Getenv("KROPS_KIND_NODE_IMAGE")
	phases := map[string]time.Duration{}
	volumesBefore := engine(t, "volume", "ls", "-q")

	mirrored := r.withMirrors(t, k8sMirror)
	up, took := r.run(t, []string{mirrored}, "krops-kind", "up", "local-host")
	if up.Code != 0 {
		t.Fatalf("krops-kind up: exit %d after %v\n%s\n%s", up.Code, took, up.Stdout, up.Stderr)
	}
	phases["kind"] = took
	if !strings.Contains(up.Stderr, "CAPD machines run "+node) {
		t.Errorf("krops-kind up does not report the machines' node image:\n%s", up.Stderr)
	}
	// What the docker provider handed kind for the tree's Clusters.
	cv, err := kubectl("get", "configmap", "cluster-vars", "-n", "flux-system", "-o", "jsonpath={.data}")
	var vars map[string]string
	if err != nil || json.Unmarshal([]byte(cv), &vars) != nil || vars["KROPS_NODE_IMAGE"] != node || !strings.HasPrefix(node, strings.SplitN(node, ":", 2)[0]+":"+vars["KROPS_KUBERNETES_VERSION"]) {
		t.Fatalf("flux-system/cluster-vars: %v %s", err, cv)
	}
	vars["KROPS_ENVIRONMENT"] = "local-host"

	pushToLaneRegistry(t, l.images())
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(providers, []byte(l.manifests(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := kubectl("apply", "--server-side", "--field-manager=krops-e2e", "-f", providers); err != nil {
		t.Fatalf("applying the providers: %v\n%s", err, out)
	}
	for _, p := range l.providers {
		if out, err := kubectl("wait", "-n", p.namespace, "--for=condition=Available", "deployment", "--all", "--timeout=5m"); err != nil {
			t.Fatalf("the %s managers: %v\n%s", p.namespace, err, out)
		}
	}
	phases["providers"] = time.Since(start)
	images, _ := kubectl("get", "pods", "-A", "-l", "cluster.x-k8s.io/provider", "-o", `jsonpath={range .items[*]}{.spec.containers[0].image}{" "}{.status.phase}{"\n"}{end}`)
	t.Logf("providers Available after %v:\n%s", phases["providers"].Round(time.Second), images)

	tree := filepath.Join(dir, "tree.yaml")
	if err := os.WriteFile(tree, []byte(treeObjects(t, r.repo, vars)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The topology webhooks answer once the managers are Available; the
	// ClusterClass must be reconciled before a Cluster may use it.
	start = time.Now()
	waitFor(t, "the tree applied", 2*time.Minute, func() (bool, string) {
		out, err := kubectl("apply", "--server-side", "--field-manager=krops-e2e", "-f", tree)
		return err == nil, out
	})
	waitFor(t, "Cluster "+mgmt, 15*time.Minute, func() (bool, string) {
		out, _ := kubectl("get", "cluster", mgmt, "-o", `jsonpath={range .status.conditions[*]}{.type}={.status} {end}`)
		machines, _ := kubectl("get", "machines", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.status.phase} {end}`)
		return strings.Contains(" "+out, " Available=True"), out + "| machines " + machines + "| containers " + strings.Join(capdContainers(t, mgmt), ", ")
	})
	phases["management Available"] = time.Since(start) // from the tree's apply

	// The machines are the engine's containers, from the lane's node image,
	// beside the load balancer.
	got := capdContainers(t, mgmt)
	lb := capdLoadBalancer(t, l.providers[3].module)
	var nodes int
	for _, c := range got {
		f := strings.Fields(c)
		switch {
		case f[0] == mgmt+"-lb" && f[1] == lb && f[2] == "running":
		case f[1] == node && f[2] == "running":
			nodes++
		default:
			t.Errorf("unexpected container %q (want %s-lb from %s, and machines from %s)", c, mgmt, lb, node)
		}
	}
	if nodes != 2 {
		t.Errorf("containers of %s: %v, want a control plane and a worker from %s", mgmt, got, node)
	}

	// The cluster answers on the host through the load balancer's published
	// port (what the docker provider's pivot inputs rewrite the endpoint to).
	kc, err := kubectl("get", "secret", mgmt+"-kubeconfig", "-o", "jsonpath={.data.value}")
	if err != nil {
		t.Fatal(kc)
	}
	raw, err := base64.StdEncoding.DecodeString(kc)
	if err != nil {
		t.Fatal(err)
	}
	port := engine(t, "port", mgmt+"-lb", "6443/tcp")
	port = port[strings.LastIndex(strings.Split(port, "\n")[0], ":")+1:]
	hostKC := filepath.Join(dir, "mgmt.kubeconfig")
	server := regexp.MustCompile(`server: https://[^\s]+`).ReplaceAll(raw, []byte("server: https://127.0.0.1:"+strings.TrimSpace(port)))
	if err := os.WriteFile(hostKC, server, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the management cluster's nodes Ready", 3*time.Minute, func() (bool, string) {
		out, err := exec.Command("kubectl", "--kubeconfig", hostKC, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		ready := err == nil && len(lines) == 2
		for _, ln := range lines {
			ready = ready && strings.HasSuffix(ln, " "+vars["KROPS_KUBERNETES_VERSION"]+" True")
		}
		return ready, string(out)
	})
	podNetworkAcrossNodes(t, hostKC)
	machinesPullThroughTheMirror(t, mgmt, l.images()[0])
	if stats, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}").CombinedOutput(); err == nil {
		t.Logf("engine containers' memory with the management cluster up:\n%s", stats)
	}

	// Teardown the way users run it, with the Cluster still there:
	// krops-sweep deletes it and waits for Cluster API to remove it. While it
	// waits, kind's node (the controller host, where CAPI and CAPD run) is
	// paused: with the host silent the state is unknown, so the sweep must
	// stop with exit 3 and keep the host, the registry and the context; the
	// rerun once the node is back must finish, and a third run find nothing.
	kindNode := laneCluster + "-control-plane"
	pausedAt := time.Duration(0)
	start = time.Now()
	faulted, took := r.runWatching(t, nil, func(line string) {
		if pausedAt == 0 && strings.Contains(line, "deleting Clusters "+mgmt) {
			pausedAt = time.Since(start)
			engine(t, "pause", kindNode)
		}
	}, "krops-sweep", "local-host")
	if pausedAt == 0 {
		t.Fatalf("teardown never reached the Cluster's deletion (exit %d)\n%s", faulted.Code, faulted.Stderr)
	}
	// The summary (stdout) says what to do next.
	if faulted.Code != 3 || !strings.Contains(faulted.Stdout, "Next: rerun `krops-sweep local-host` once the API server answers") {
		t.Errorf("teardown with the controller host paused: exit %d after %v, want 3 and what to do\n%s\n%s", faulted.Code, took, faulted.Stdout, faulted.Stderr)
	}
	t.Logf("teardown with kind's node paused %v in: exit %d after %v\n%s\n%s", pausedAt.Round(time.Second), faulted.Code, took.Round(time.Second), faulted.Stderr, faulted.Stdout)
	for _, want := range []string{kindNode, "krops-registry"} {
		if engine(t, "ps", "-a", "--filter", "name=^"+want+"$", "--format", "{{.Names}}") != want {
			t.Errorf("after the exit 3 the engine lost %s", want)
		}
	}
	if kc, err := os.ReadFile(filepath.Join(r.home, ".kube", "config")); err != nil || !strings.Contains(string(kc), "kind-"+laneCluster) {
		t.Errorf("after the exit 3 the kubeconfig lost the kind context: %v\n%s", err, kc)
	}
	engine(t, "unpause", kindNode)

	start = time.Now()
	down, took := r.run(t, nil, "krops-sweep", "local-host")
	if down.Code != 0 {
		t.Fatalf("teardown rerun: exit %d\n%s\n%s", down.Code, down.Stdout, down.Stderr)
	}
	phases["teardown"] = took
	// What is left is what the engine and the kubeconfig list, not what
	// krops reports.
	if l := append(leftovers(t, laneCluster), capdContainers(t, mgmt)...); len(l) > 0 {
		t.Errorf("after teardown the engine still has %v", l)
	}
	if v := newVolumes(t, volumesBefore); len(v) > 0 {
		t.Errorf("after teardown the engine still has the volumes %v", v)
	}
	if n := engine(t, "network", "ls", "--format", "{{.Name}}"); strings.Contains(n, "krops") {
		t.Errorf("after teardown the engine still has a network of krops:\n%s", n)
	}
	if kc, err := os.ReadFile(filepath.Join(r.home, ".kube", "config")); err == nil && (strings.Contains(string(kc), laneCluster) || strings.Contains(string(kc), mgmt)) {
		t.Errorf("after teardown the kubeconfig still names the environment's clusters:\n%s", kc)
	}
	again, _ := r.run(t, nil, "krops-sweep", "local-host")
	if again.Code != 0 {
		t.Errorf("a second teardown: exit %d, want 0 (nothing to do)\n%s", again.Code, again.Stderr)
	}
	var report []string
	for _, k := range []string{"kind", "providers", "management Available", "teardown"} {
		report = append(report, fmt.Sprintf("%s %v", k, phases[k].Round(time.Second)))
	}
	t.Logf("phases: %s", strings.Join(report, ", "))
}
