// Package toolbox runs a krops task inside the toolbox image: the
// repository mounted at /workspace, .kube/ persisted in it, the container
// engine's socket mounted where the tools inside expect it, and an explicit
// environment allow-list. Secrets pass by name (-e NAME, the value read by
// the engine from this process's environment), never in argv.
package toolbox

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk/engine"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/dotenv"
	"github.com/kropsdev/krops/tools/kit/gitsource"
)

// KindNetwork is the engine network kind puts its nodes on.
const KindNetwork = "kind"

// Inside the container.
const (
	Workspace  = "/workspace"
	SocketPath = engine.DockerSocket // where the engine socket is mounted
	FilesDir   = "/run/krops/files"  // host files named by path knobs
	MgmtDir    = "/run/krops/mgmt"   // the directory of an MGMT_KUBECONFIG outside the repository
	ReportDir  = "/run/krops/report" // the directory of an ORPHAN_REPORT_JSON outside the repository
	AWSConfig  = "/run/krops/aws"    // ~/.aws, for AWS_PROFILE
	// Home is HOME inside when the container runs as the caller: the
	// image's /root is not theirs, /tmp is anyone's.
	Home        = "/tmp"
	DefaultTask = "--list"
)

// Forwarded are the variables passed through when set (in .env or the
// environment): the krops knobs a task reads, and cloud credentials.
var Forwarded = []string{
	"KROPS_PROFILE", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KROPS_KIND_NODE_IMAGE", "KROPS_REGISTRY_NAME",
	"KROPS_CHART_REPOSITORY", "KROPS_PROVIDER_REPOSITORY", "KROPS_FLUX_REGISTRY", "REGISTRY_PORT", "REGISTRY_READY_RETRIES", "LOCAL_RECONCILE_TIMEOUT", "GIT_REPO_URL", "GITHUB_TOKEN", "GITHUB_USER",
	"AGE_PUBLIC_KEY", "REGISTRY_HOST", "OCI_REPOSITORY", "OCI_TAG", "KROPS_OCI_GIT_SHA", "KROPS_OCI_GIT_REF", "KROPS_OCI_SOURCE_URL", "BOOTSTRAP_PIVOT", "PIVOT_SKIP_DELETE", "MGMT_READY_TIMEOUT",
	"MGMT_POLL_INTERVAL", "AWS_ONLY", "FORCE_KIND_DELETE", "CLUSTER_DELETE_TIMEOUT", "PROVIDER_DELETE_TIMEOUT",
	"ORPHAN_MIN_AGE_HOURS", "KROPS_RUN_ID", "KROPS_RUN_TTL", "KROPS_REVISION", "KROPS_RUN_KIND",
	"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AZURE_SUBSCRIPTION_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
	"GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT",
}

// PathKnobs name host files the tasks read: each is mounted read-only under
// FilesDir (or found under /workspace when it is inside the repository) and
// the variable rewritten to the path inside.
var PathKnobs = []string{"AGE_KEY_FILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS"}

// RepoPathKnobs name files that must be inside the repository: the
// configuration resolves the trees relative to its own directory, which a
// mount of the file alone would not bring along.
var RepoPathKnobs = []string{"BOOTSTRAP_CONFIG"}

// OutputKnobs name the host files the tasks write, each with where its
// directory is mounted read-write (the file need not exist yet): the
// pivot's management kubeconfig, which later teardowns and bootstraps
// read, and the orphan report.
var OutputKnobs = map[string]string{"MGMT_KUBECONFIG": MgmtDir, "ORPHAN_REPORT_JSON": ReportDir}

// SetInside are the knobs the toolbox sets itself, to the paths and engine
// as seen from inside; NotForwarded are those that have no meaning there.
var (
	SetInside    = []string{"KROPS_TOOLBOX", "ENGINE_SOCK", "CONTAINER_ENGINE", "KUBECONFIG"}
	NotForwarded = map[string]string{
		"KROPS_PLUGIN_DIR":         "the image carries its plugins; a host directory's binaries may not run there",
		"KROPS_REATTACH_PROVIDERS": "debug plugins listen on the host, which the container does not reach",
	}
)

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
	// UID and GID are the caller's: on a rootful Linux engine the container
	// runs as them.
	UID, GID int
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
	)
	// The kind network, so the tools inside reach kind's API server and the
	// registry by their container names. Before the first kind cluster it
	// does not exist (docker run would refuse it): krops-kind joins it from
	// inside once kind has created it.
	if _, err := eng.Run(ctx, "network", "inspect", KindNetwork); err == nil {
		args = append(args, "--network", KindNetwork)
	}
	env := append([]string{}, o.Environ...)
	forced := map[string]string{
		"KROPS_TOOLBOX":    "1",
		"ENGINE_SOCK":      SocketPath,
		"CONTAINER_ENGINE": eng.Name,
		"KUBECONFIG":       Workspace + "/.kube/config",
	}
	user, err := identity(ctx, eng, o)
	if err != nil {
		return nil, err
	}
	if len(user) > 0 {
		args = append(args, user...)
		forced["HOME"] = Home
	}
	if eng.Name == "podman" {
		forced["CONTAINER_HOST"] = engine.ToolboxContainerHost
	}
	// Each host file a knob names is found inside, under /workspace or a
	// mount, and the variable rewritten to that path.
	type mapper func(repo, hostPath, name string) (inside, mount string, err error)
	mapped := []struct {
		names []string
		m     mapper
	}{
		{PathKnobs, mapPath},
		{RepoPathKnobs, mapInRepo},
		{slices.Sorted(maps.Keys(OutputKnobs)), mapOutput},
	}
	for _, set := range mapped {
		for _, name := range set.names {
			hostPath := vars[name]
			if hostPath == "" {
				continue
			}
			inside, mount, err := set.m(o.Repo, hostPath, name)
			if err != nil {
				return nil, err
			}
			if mount != "" {
				args = append(args, "-v", mount)
			}
			forced[name] = inside
		}
	}
	if vars["AWS_PROFILE"] != "" && vars["AWS_CONFIG_FILE"] == "" && o.Home != "" {
		if st, err := os.Stat(filepath.Join(o.Home, ".aws")); err == nil && st.IsDir() {
			// Not under the image's /root: a caller's uid may not enter it.
			args = append(args, "-v", filepath.Join(o.Home, ".aws")+":"+AWSConfig+":ro")
			forced["AWS_CONFIG_FILE"] = AWSConfig + "/config"
			if vars["AWS_SHARED_CREDENTIALS_FILE"] == "" {
				forced["AWS_SHARED_CREDENTIALS_FILE"] = AWSConfig + "/credentials"
			}
		}
	}
	// The artifact's source is read here: git inside refuses a checkout
	// another uid owns and cannot follow a linked worktree's .git file.
	// Outside a checkout nothing is set, and a task that publishes says so.
	gitSource(ctx, o.Repo, vars)
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
		if v, ok := vars[k]; ok && v != "" && v != forced[k] && !isPathKnob(k) && k != "HOME" {
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
	_, out := OutputKnobs[k]
	return out || slices.Contains(PathKnobs, k) || slices.Contains(RepoPathKnobs, k)
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

// mapInRepo maps a file that must be inside the repository; one outside
// is refused.
func mapInRepo(repo, hostPath, name string) (inside, mount string, err error) {
	inside, mount, err = mapPath(repo, hostPath, name)
	if err == nil && mount != "" {
		return "", "", fmt.Errorf("%s=%s is outside the repository %s: the toolbox mounts the repository only, and the configuration's trees resolve next to it; use a configuration file inside the checkout, or run the task natively", name, hostPath, repo)
	}
	return inside, mount, err
}

// mapOutput maps the file a task writes: under /workspace when it is in the
// repository, else its directory mounted read-write where OutputKnobs
// says. The directory must exist; the task creates the file.
func mapOutput(repo, hostPath, name string) (inside, mount string, err error) {
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return "", "", err
	}
	if rel, err := filepath.Rel(repo, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return Workspace + "/" + filepath.ToSlash(rel), "", nil
	}
	dir := filepath.Dir(abs)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", "", fmt.Errorf("%s=%s: its directory %s must exist (the toolbox mounts it so the task can write the file there)", name, hostPath, dir)
	}
	at := OutputKnobs[name]
	return at + "/" + filepath.Base(abs), dir + ":" + at, nil
}

// identity returns the engine arguments that run the container as the
// caller, on a rootful Linux engine, so what it writes in the repository
// (.kube/, .task/) is the caller's, with the engine socket's group so the
// tools inside still reach the engine. Rootless Docker and Podman map the
// container's root to the caller already, and Docker Desktop maps bind
// mounts to the caller: there the container keeps the image's user.
func identity(ctx context.Context, eng *engine.Engine, o Options) ([]string, error) {
	if o.UID == 0 {
		return nil, nil
	}
	var query string
	switch eng.Name {
	case "podman":
		query = "{{.Host.Security.Rootless}}"
	default:
		query = "{{.OperatingSystem}} {{.SecurityOptions}}"
	}
	res, err := eng.Run(ctx, "info", "--format", query)
	if err != nil {
		return nil, fmt.Errorf("%s info: %w", eng.Name, err)
	}
	out := strings.TrimSpace(string(res.Stdout))
	if out == "true" || strings.Contains(out, "rootless") || strings.Contains(out, "Docker Desktop") {
		return nil, nil
	}
	args := []string{"--user", fmt.Sprintf("%d:%d", o.UID, o.GID)}
	if gid, ok := socketGroup(eng.Sock); ok && gid != o.GID {
		args = append(args, "--group-add", fmt.Sprint(gid))
	}
	return args, nil
}

// gitSource sets KROPS_OCI_GIT_SHA, _REF and KROPS_OCI_SOURCE_URL from the
// checkout on the host unless the caller set any of them; they are
// forwarded by name like the other knobs.
func gitSource(ctx context.Context, repo string, vars map[string]string) {
	for _, k := range []string{"KROPS_OCI_GIT_SHA", "KROPS_OCI_GIT_REF", "KROPS_OCI_SOURCE_URL"} {
		if vars[k] != "" {
			return
		}
	}
	src, err := gitsource.Read(ctx, repo, func(string) (string, bool) { return "", false })
	if err != nil {
		return
	}
	vars["KROPS_OCI_GIT_SHA"], vars["KROPS_OCI_GIT_REF"], vars["KROPS_OCI_SOURCE_URL"] = src.SHA, src.Ref, src.URL
}
