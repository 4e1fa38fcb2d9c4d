package kubecfg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

const kindKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: kind-mgmt
  cluster: {server: "https://127.0.0.1:41234", certificate-authority-data: Q0E=}
users:
- name: kind-mgmt
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
contexts:
- name: kind-mgmt
  context: {cluster: kind-mgmt, user: kind-mgmt}
current-context: kind-mgmt
`

const existing = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
users:
- name: prod
  user: {token: t}
contexts:
- name: prod
  context: {cluster: prod, user: prod}
current-context: prod
`

func TestMergeKeepsContextsAndWrites0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Merge(path, []byte(kindKubeconfig), "bootstrap"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: the file holds a client key", fi.Mode().Perm())
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "prod" {
		t.Errorf("current context %q: the user's must be left alone", cfg.CurrentContext)
	}
	if _, ok := cfg.Contexts["prod"]; !ok {
		t.Error("the existing context was lost")
	}
	ctx, ok := cfg.Contexts["bootstrap"]
	if !ok || cfg.Clusters[ctx.Cluster].Server != "https://127.0.0.1:41234" || string(cfg.AuthInfos[ctx.AuthInfo].ClientKeyData) != "KEY" {
		t.Errorf("context bootstrap: %+v", ctx)
	}
	// Merging again (a reuse) replaces, never duplicates.
	if err := Merge(path, []byte(strings.Replace(kindKubeconfig, "41234", "45678", 1)), "bootstrap"); err != nil {
		t.Fatal(err)
	}
	cfg, _ = clientcmd.LoadFromFile(path)
	if len(cfg.Contexts) != 2 || cfg.Clusters["bootstrap"].Server != "https://127.0.0.1:45678" {
		t.Errorf("after a second merge: %d contexts, server %s", len(cfg.Contexts), cfg.Clusters["bootstrap"].Server)
	}
	if err := Remove(path, "bootstrap"); err != nil {
		t.Fatal(err)
	}
	cfg, _ = clientcmd.LoadFromFile(path)
	if _, ok := cfg.Contexts["bootstrap"]; ok || cfg.Contexts["prod"] == nil {
		t.Errorf("remove: contexts %v", cfg.Contexts)
	}
}

func TestANewFileGetsTheContextAsCurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config")
	if err := Merge(path, []byte(kindKubeconfig), "kind-mgmt"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil || cfg.CurrentContext != "kind-mgmt" {
		t.Errorf("new file: current %q, %v", cfg.CurrentContext, err)
	}
	if err := Remove(filepath.Join(t.TempDir(), "absent"), "kind-mgmt"); err != nil {
		t.Errorf("removing from a missing file: %v", err)
	}
}

func TestPathIsOneFile(t *testing.T) {
	if _, err := Path("/a/config:/b/config", "/home/u"); err == nil || !strings.Contains(err.Error(), "a list of files") {
		t.Errorf("a list was accepted: %v", err)
	}
	if p, err := Path("", "/home/u"); err != nil || p != "/home/u/.kube/config" {
		t.Errorf("default: %q %v", p, err)
	}
	if p, _ := Path("/x/kc", "/home/u"); p != "/x/kc" {
		t.Errorf("explicit: %q", p)
	}
}

func TestWritable(t *testing.T) {
	dir := t.TempDir()
	if err := Writable(filepath.Join(dir, "new", "deeper", "config")); err != nil {
		t.Errorf("a file under a writable directory: %v", err)
	}
	if err := Writable(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if err := Writable(filepath.Join(file, "config")); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("under a file: %v", err)
	}
}
