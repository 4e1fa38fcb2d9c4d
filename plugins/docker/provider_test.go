package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// standIn installs testdata/standin-engine.sh as `docker` (a STAND-IN: no
// container engine runs here) and returns the plugin's base environment and
// the directory holding its state and argv log.
func standIn(t *testing.T, state string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/standin-engine.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docker"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{"PATH=" + sdktest.PathWithoutEngines(t, "/usr/bin:/bin", dir), "STANDIN_DIR=" + dir}, sdktest.NoEngineEnv...), dir
}

func calls(t *testing.T, dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

const config = `{"bootstrap": {"registry-name": "krops-registry"}, "environment": {"mgmt-cluster": "local-management", "teardown": {"mgmt-container-prefix": "local-management"}}, "provider": {}}`

func start(t *testing.T, baseEnv []string, env map[string]string) *sdk.Client {
	t.Helper()
	bin := sdktest.Build(t, ".", "docker")
	c, err := sdk.Load(context.Background(), "docker", sdk.LoadOptions{Path: bin, BaseEnv: baseEnv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Configure(context.Background(), sdk.Config{Environment: "local-host", Raw: []byte(config)}, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// registryServer is a real HTTP server on loopback playing the registry's
// /v2/ endpoint: it fails `failures` times with status, then answers 200.
func registryServer(t *testing.T, failures int32, status int) (port string, hits *atomic.Int32) {
	hits = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		if r.URL.Path != "/v2/" {
			http.NotFound(w, r)
			return
		}
		if n <= failures {
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	return port, hits
}

// afterDetection is calls after what engine.Detect asks Docker first: it answers, it is not
// podman's shim, and where its daemon-side socket is.
func afterDetection(calls ...string) []string {
	return append([]string{"info", "--version", "info --format {{.OperatingSystem}}", "context inspect --format {{.Endpoints.docker.Host}}"}, calls...)
}

func TestRegistryLifecycleAgainstAStandInEngine(t *testing.T) {
	cases := []struct {
		name      string
		state     func(port string) string
		wantCalls []string
		wantMsg   string
	}{
		{"missing registry is created", func(string) string { return "exists=0" },
			afterDetection("container inspect krops-registry", "run -d --restart=always --name krops-registry --network kind -p 127.0.0.1:PORT:5000 registry:2"), "created"},
		{"healthy registry is reused", func(p string) string { return "exists=1 running=1 port=" + p },
			afterDetection("container inspect krops-registry"), "reused"},
		{"stopped registry is started", func(p string) string { return "exists=1 running=0 port=" + p },
			afterDetection("container inspect krops-registry", "start krops-registry"), "reused, restarted"},
		{"registry off the kind network is connected, not recreated", func(p string) string { return "exists=1 running=1 network=bridge port=" + p },
			afterDetection("container inspect krops-registry", "network connect kind krops-registry"), "reused, connected to the kind network"},
		{"stopped registry off the kind network is connected and started", func(p string) string { return "exists=1 running=0 network=bridge port=" + p },
			afterDetection("container inspect krops-registry", "network connect kind krops-registry", "start krops-registry"), "reused, connected to the kind network and restarted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port, _ := registryServer(t, 0, 0)
			base, dir := standIn(t, tc.state(port))
			c := start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "0"})
			res, err := c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
			msgs := res.Messages
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(calls(t, dir), "\n")
			want := strings.ReplaceAll(strings.Join(tc.wantCalls, "\n"), "PORT", port)
			if got != want {
				t.Errorf("engine calls:\n%s\nwant:\n%s", got, want)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.wantMsg) || !strings.Contains(strings.Join(msgs, "\n"), "registry ready") {
				t.Errorf("messages %q lack %q", msgs, tc.wantMsg)
			}
		})
	}
}

// A registry publishing another port is refused (exit 2 at the host), not
// recreated: a new container would start without the images the old one
// holds. Nothing is removed or created.
func TestRegistryOnAnotherPortIsRefusedNotRecreated(t *testing.T) {
	for _, tc := range []struct{ state, has, keep string }{
		{"exists=1 running=1 port=5999", "publishes host port 5999", "set REGISTRY_PORT=5999"},
		{"exists=1 running=0 port=", "publishes no host port", ""},
	} {
		port, hits := registryServer(t, 0, 0)
		base, dir := standIn(t, tc.state)
		c := start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "0"})
		_, err := c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
		if !errors.Is(err, sdk.ErrRefused) {
			t.Fatalf("%s: err %v, want a refusal", tc.state, err)
		}
		for _, want := range []string{"krops-registry " + tc.has, "not REGISTRY_PORT=" + port, tc.keep, "docker rm -f krops-registry", "drop the images"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the refusal lacks %q: %v", tc.state, want, err)
			}
		}
		if got := strings.Join(calls(t, dir), "\n"); got != strings.Join(afterDetection("container inspect krops-registry"), "\n") {
			t.Errorf("%s: engine calls after the inspect:\n%s", tc.state, got)
		}
		if hits.Load() != 0 {
			t.Errorf("%s: the registry was probed after the refusal", tc.state)
		}
	}
}

func TestRegistryProbeRetriesOnlyTransientFailures(t *testing.T) {
	port, hits := registryServer(t, 2, http.StatusServiceUnavailable)
	base, _ := standIn(t, "exists=1 running=1 port="+port)
	c := start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "3"})
	if _, err := c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate}); err != nil {
		t.Fatalf("two 503s then 200 must succeed: %v", err)
	}
	if hits.Load() != 3 {
		t.Errorf("%d probes, want 3", hits.Load())
	}

	port, hits = registryServer(t, 100, http.StatusNotFound)
	base, _ = standIn(t, "exists=1 running=1 port="+port)
	c = start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "5"})
	_, err := c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if err == nil || !strings.Contains(err.Error(), "404") || hits.Load() != 1 {
		t.Errorf("a 404 must fail at once: err %v after %d probes", err, hits.Load())
	}

	port, hits = registryServer(t, 100, http.StatusBadGateway)
	base, _ = standIn(t, "exists=1 running=1 port="+port)
	c = start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "1"})
	_, err = c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if err == nil || !strings.Contains(err.Error(), "not ready after 2 attempts") || hits.Load() != 2 {
		t.Errorf("retries exhausted: err %v after %d probes", err, hits.Load())
	}
}

func TestKindConfigPivotEndpointAndTeardown(t *testing.T) {
	base, dir := standIn(t, "exists=1 running=1")
	c := start(t, base, map[string]string{"REGISTRY_PORT": "5001"})
	ctx := context.Background()
	kc, err := c.KindConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Through the real protocol: the mirror arrives as a mirror, and no
	// containerd patch comes with it (a registry.mirrors patch would stop
	// containerd beside the host's hosts directory).
	want := []sdk.RegistryMirror{{Registry: "localhost:5001", Endpoints: []string{"http://krops-registry:5000"}}}
	if len(kc.ContainerdConfigPatches) != 0 || !reflect.DeepEqual(kc.RegistryMirrors, want) {
		t.Errorf("kind config: patches %q, mirrors %+v, want no patch and %+v", kc.ContainerdConfigPatches, kc.RegistryMirrors, want)
	}
	in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Server != "https://127.0.0.1:55001" {
		t.Errorf("rewritten server %q", in.Server)
	}
	if got := calls(t, dir); got[len(got)-1] != "port local-management-lb 6443/tcp" {
		t.Errorf("last engine call %q", got[len(got)-1])
	}
	// A workload cluster's endpoint (krops-flux-seed's follow-up wait).
	if in, err = c.PivotInputs(ctx, sdk.PivotInputsRequest{Cluster: "local-workload"}); err != nil || in.Server != "https://127.0.0.1:55001" {
		t.Errorf("workload endpoint %q %v", in.Server, err)
	}
	if got := calls(t, dir); got[len(got)-1] != "port local-workload-lb 6443/tcp" {
		t.Errorf("last engine call %q", got[len(got)-1])
	}
	in, err = c.PivotInputs(ctx, sdk.PivotInputsRequest{InToolbox: true})
	if err != nil || in.Server != "" {
		t.Errorf("inside the toolbox the recorded endpoint is reachable: %q %v", in.Server, err)
	}
	p, err := c.TeardownPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.HostRemoval != sdk.RemoveContainers || p.ContainerPrefix != "local-management" || p.CloudOnlySweepAllowed || strings.Join(p.RemoveLast, ",") != "krops-registry" {
		t.Errorf("policy %+v", p)
	}
	if err := c.Discover(ctx, func(sdk.DiscoverEvent) error { return nil }); err == nil || !strings.Contains(err.Error(), "docker") || !strings.Contains(err.Error(), "discover") {
		t.Errorf("discover on the docker provider: %v", err)
	}
}

func TestPreflightReportsADownEngine(t *testing.T) {
	base, _ := standIn(t, "engine_down=1")
	c := start(t, base, nil)
	checks, err := c.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 1 || checks[0].OK || !strings.Contains(checks[0].Message, "no container engine answers") || checks[0].Remedy == "" {
		t.Errorf("checks %+v", checks)
	}
}

func TestConformance(t *testing.T) {
	base, _ := standIn(t, "exists=1 running=1")
	sdkconformance.Run(t, sdktest.Build(t, ".", "docker"), sdkconformance.Options{
		Config:  sdk.Config{Raw: []byte(config)},
		BaseEnv: base,
	})
}

// A node image set for kind is the image of CAPD's machines too: the hook
// hands kind flux-system/cluster-vars with the image and the Kubernetes
// version its tag starts with, the management cluster gets the same before
// the move, and a tag that names no version is refused at Configure.
func TestNodeImageOverrideReachesTheClusters(t *testing.T) {
	ctx := context.Background()
	port, _ := registryServer(t, 0, 0)
	for _, tc := range []struct{ image, version string }{
		{"krops.local/kind-node:v1.37.2-ddfaa2639445", "v1.37.2"},
		{"registry.example.com:5000/kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5", "v1.37.0"},
	} {
		base, _ := standIn(t, "exists=1 running=1 port="+port)
		c := start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "0", "KROPS_KIND_NODE_IMAGE": tc.image})
		res, err := c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
		if err != nil {
			t.Fatal(err)
		}
		docs := string(bytesJoin(res.Manifests))
		for _, want := range []string{`"kind":"Namespace"`, `"name":"cluster-vars","namespace":"flux-system"`,
			`"KROPS_NODE_IMAGE":"` + tc.image + `"`, `"KROPS_KUBERNETES_VERSION":"` + tc.version + `"`} {
			if !strings.Contains(docs, want) {
				t.Errorf("%s: hook manifests lack %s:\n%s", tc.image, want, docs)
			}
		}
		if !strings.Contains(strings.Join(res.Messages, "\n"), "CAPD machines run "+tc.image) {
			t.Errorf("messages %q", res.Messages)
		}
		in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{InToolbox: true})
		if err != nil || string(bytesJoin(in.Manifests)) != docs {
			t.Errorf("pivot inputs: %v\n%s\nwant the hook's:\n%s", err, bytesJoin(in.Manifests), docs)
		}
		if in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{Cluster: "local-workload", InToolbox: true}); err != nil || len(in.Manifests) != 0 {
			t.Errorf("a workload cluster's endpoint request carries manifests: %v %d", err, len(in.Manifests))
		}
	}

	// Without the override only the mirrors are written: the node image is
	// the tree's pinned default, kind's own.
	base, _ := standIn(t, "exists=1 running=1 port="+port)
	c := start(t, base, map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "0"})
	res, err := c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if docs := string(bytesJoin(res.Manifests)); err != nil || !strings.Contains(docs, `"KROPS_REGISTRY_MIRRORS"`) || strings.Contains(docs, "KROPS_NODE_IMAGE") || strings.Contains(docs, "KROPS_KUBERNETES_VERSION") {
		t.Errorf("no override: %v\n%s", err, docs)
	}

	bin := sdktest.Build(t, ".", "docker")
	c, err = sdk.Load(ctx, "docker", sdk.LoadOptions{Path: bin, BaseEnv: base})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Configure(ctx, sdk.Config{Environment: "local-host", Raw: []byte(config)}, func(k string) (string, bool) {
		return map[string]string{"KROPS_KIND_NODE_IMAGE": "registry.example.com/kindest/node:latest"}[k], k == "KROPS_KIND_NODE_IMAGE"
	})
	if err == nil || !strings.Contains(err.Error(), `KROPS_KIND_NODE_IMAGE="registry.example.com/kindest/node:latest"`) || !strings.Contains(err.Error(), "retag") {
		t.Errorf("a tag without a version: %v", err)
	}
}

// CAPD's machines pull through the mirrors kind's node pulls through: the
// local registry's, then the configuration's [[mirrors]], in cluster-vars
// as the JSON list the ClusterClasses' registryMirrors variable takes; the
// management cluster gets the same list before the move.
func TestTheMachinesGetKindsMirrors(t *testing.T) {
	ctx := context.Background()
	port, _ := registryServer(t, 0, 0)
	base, _ := standIn(t, "exists=1 running=1 port="+port)
	bin := sdktest.Build(t, ".", "docker")
	c, err := sdk.Load(ctx, "docker", sdk.LoadOptions{Path: bin, BaseEnv: base})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := strings.Replace(config, `"provider": {}`, `"provider": {}, "mirrors": [`+
		`{"registry": "registry.k8s.io", "endpoints": ["https://mirror.example.com", "http://krops-registry:5000"]}, `+
		`{"registry": "docker.io", "endpoints": ["https://hub-cache.example.com"]}]`, 1)
	env := map[string]string{"REGISTRY_PORT": port, "REGISTRY_READY_RETRIES": "0"}
	if err := c.Configure(ctx, sdk.Config{Environment: "local-host", Raw: []byte(raw)}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	res, err := c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if err != nil {
		t.Fatal(err)
	}
	var vars []byte
	for _, m := range res.Manifests {
		var o struct {
			Kind string
			Data map[string]string
		}
		if json.Unmarshal(m, &o) == nil && o.Kind == "ConfigMap" {
			vars = []byte(o.Data["KROPS_REGISTRY_MIRRORS"])
		}
	}
	var got []struct {
		Registry  string   `json:"registry"`
		Endpoints []string `json:"endpoints"`
	}
	if err := json.Unmarshal(vars, &got); err != nil {
		t.Fatalf("KROPS_REGISTRY_MIRRORS is not a JSON list: %v: %q", err, vars)
	}
	want := fmt.Sprintf("localhost:%s=http://krops-registry:5000 registry.k8s.io=https://mirror.example.com,http://krops-registry:5000 docker.io=https://hub-cache.example.com", port)
	var have []string
	for _, m := range got {
		have = append(have, m.Registry+"="+strings.Join(m.Endpoints, ","))
	}
	if strings.Join(have, " ") != want {
		t.Errorf("mirrors in cluster-vars: %s\nwant %s", strings.Join(have, " "), want)
	}
	if msgs := strings.Join(res.Messages, "\n"); !strings.Contains(msgs, "CAPD machines pull localhost:"+port+", registry.k8s.io, docker.io through their mirrors") {
		t.Errorf("messages %q", res.Messages)
	}
	in, err := c.PivotInputs(ctx, sdk.PivotInputsRequest{InToolbox: true})
	if err != nil || !strings.Contains(string(bytesJoin(in.Manifests)), "hub-cache.example.com") {
		t.Errorf("the management cluster does not get the mirrors: %v\n%s", err, bytesJoin(in.Manifests))
	}
}

func bytesJoin(docs [][]byte) []byte {
	var out []byte
	for _, d := range docs {
		out = append(append(out, d...), '\n')
	}
	return out
}
