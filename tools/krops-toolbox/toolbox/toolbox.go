// Package toolbox runs a krops task inside the toolbox image: the
// repository mounted at /workspace, .kube/ persisted in it, the container
// engine's socket mounted where the tools inside expect it, and an explicit
// environment allow-list. Secrets pass by name (-e NAME, the value read by
// the engine from this process's environment), never in argv.
package toolbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/dotenv"
	"github.com/kropsdev/krops/tools/kit/engine"
)

// Inside the container.
const (
	Workspace   = "/workspace"
	SocketPath  = engine.DockerSocket // where the engine socket is mounted
	FilesDir    = "/run/krops/files"  // host files named by path knobs
	AWSConfig   = "/root/.aws"
	DefaultTask = "--list"
)

// Forwarded are the variables passed through when set (in .env or the
// environment): the krops knobs a task reads, and cloud credentials.
var Forwarded = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KROPS_REGISTRY_NAME",
	"REGISTRY_PORT", "REGISTRY_READY_RETRIES", "LOCAL_RECONCILE_TIMEOUT", "GIT_REPO_URL", "GITHUB_TOKEN", "GITHUB_USER",
	"AGE_PUBLIC_KEY", "OCI_REPOSITORY", "OCI_TAG", "BOOTSTRAP_PIVOT", "PIVOT_SKIP_DELETE", "MGMT_READY_TIMEOUT",
	"MGMT_POLL_INTERVAL", "AWS_ONLY", "FORCE_KIND_DELETE", "CLUSTER_DELETE_TIMEOUT", "PROVIDER_DELETE_TIMEOUT",
	"ORPHAN_MIN_AGE_HOURS", "KROPS_RUN_ID", "KROPS_RUN_TTL", "KROPS_REVISION", "KROPS_RUN_KIND",
	"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AZURE_SUBSCRIPTION_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
	"GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT",
}

// PathKnobs name host files: each is mounted read-only under FilesDir (or
// found under /workspace when it is inside the repository) and the
// variable rewritten to the path inside.
var PathKnobs = []string{"AGE_KEY_FILE", "MGMT_KUBECONFIG", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS"}

// Options describe one toolbox run.
type Options struct {
	// Repo is the repository root on the host.
	Repo string
	// Image is the toolbox image.
	Image string
	// Args are the task's arguments (task name, ENV=...).
	Args []string
	// Environ is this process's environment; .env (Repo/.env) wins over it,
	// as in task and mise.
	Environ []string
	// Runner runs the read-only engine queries; nil means real processes.
	Runner proc.Runner
	// Terminal: stdin is a terminal (-it).
	Terminal bool
	// Home is the host home directory (for ~/.aws).
	Home string
}

// Plan is what Prepare decided: the engine command and its environment.
type Plan struct {
	Engine string
	Args   []string
	// Env is the engine command's environment: this process's plus the
	// .env values, so -e NAME finds them.
	Env      []string
	Warnings []string
}

// Prepare reads .env, detects the engine and its socket, and builds the
// engine command. It runs nothing but read-only engine queries.
func Prepare(ctx context.Context, o Options) (*Plan, error) {
	vars := map[string]string{}
	for _, kv := range o.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	dotenvPath := filepath.Join(o.Repo, ".env")
	entries, problems, err := dotenv.Load(dotenvPath)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		var lines []string
		for _, p := range problems {
			lines = append(lines, p.String())
		}
		return nil, fmt.Errorf("%s: %s (task and mise refuse this file too): fix those lines", dotenvPath, strings.Join(lines, "; "))
	}
	for _, e := range entries {
		vars[e.Key] = e.Value
	}
	runner := o.Runner
	if runner == nil {
		runner = proc.Exec{}
	}
	eng, err := engine.Detect(ctx, engine.Options{Engine: vars["CONTAINER_ENGINE"], Sock: vars["ENGINE_SOCK"], Env: o.Environ, Runner: runner})
	if err != nil {
		return nil, err
	}
	p := &Plan{Engine: eng.Name, Warnings: eng.Warnings}
	// The daemon-side socket (engine.Detect: Docker Desktop, the docker
	// context, podman info, or ENGINE_SOCK), as kind nodes mount it.
	sock := eng.Sock
	args := []string{"run", "--rm", "--init"}
	if o.Terminal {
		args = append(args, "-it")
	}
	if err := os.MkdirAll(filepath.Join(o.Repo, ".kube"), 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Join(o.Repo, ".kube"), err)
	}
	args = append(args,
		"-v", o.Repo+":"+Workspace, "-w", Workspace,
		"-v", sock+":"+SocketPath,
		// The kind network, so the tools inside reach kind's API server by
		// its container name.
		"--network", "kind",
	)
	forced := map[string]string{
		"KROPS_TOOLBOX":    "1",
		"ENGINE_SOCK":      SocketPath,
		"CONTAINER_ENGINE": eng.Name,
		"KUBECONFIG":       Workspace + "/.kube/config",
	}
	if eng.Name == "podman" {
		forced["CONTAINER_HOST"] = engine.ToolboxContainerHost
	}
	for _, name := range PathKnobs {
		hostPath := vars[name]
		if hostPath == "" {
			continue
		}
		inside, mount, err := mapPath(o.Repo, hostPath, name)
		if err != nil {
			return nil, err
		}
		if mount != "" {
			args = append(args, "-v", mount)
		}
		forced[name] = inside
	}
	if vars["AWS_PROFILE"] != "" && vars["AWS_CONFIG_FILE"] == "" && o.Home != "" {
		if st, err := os.Stat(filepath.Join(o.Home, ".aws")); err == nil && st.IsDir() {
			args = append(args, "-v", filepath.Join(o.Home, ".aws")+":"+AWSConfig+":ro")
		}
	}
	env := append([]string{}, o.Environ...)
	var names []string
	for _, name := range Forwarded {
		if _, forcedToo := forced[name]; forcedToo {
			continue
		}
		if v, ok := vars[name]; ok && v != "" {
			names = append(names, name)
			env = append(env, name+"="+v)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "-e", name)
	}
	var forcedNames []string
	for k := range forced {
		forcedNames = append(forcedNames, k)
	}
	sort.Strings(forcedNames)
	for _, k := range forcedNames {
		if v, ok := vars[k]; ok && v != "" && v != forced[k] && !isPathKnob(k) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s=%s is replaced by %s inside the toolbox", k, v, forced[k]))
		}
		// Not secrets: these values are krops's own paths and flags.
		args = append(args, "-e", k+"="+forced[k])
	}
	args = append(args, o.Image)
	if len(o.Args) == 0 {
		args = append(args, DefaultTask)
	} else {
		args = append(args, o.Args...)
	}
	p.Args, p.Env = args, env
	return p, nil
}

func isPathKnob(k string) bool {
	for _, n := range PathKnobs {
		if n == k {
			return true
		}
	}
	return false
}

// mapPath maps a host file to its path inside: under /workspace when it is
// in the repository, else mounted read-only under FilesDir.
func mapPath(repo, hostPath, name string) (inside, mount string, err error) {
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", "", fmt.Errorf("%s=%s: %w (the toolbox mounts it, so it must exist)", name, hostPath, err)
	}
	if rel, err := filepath.Rel(repo, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return Workspace + "/" + filepath.ToSlash(rel), "", nil
	}
	inside = FilesDir + "/" + filepath.Base(abs)
	return inside, abs + ":" + inside + ":ro", nil
}
