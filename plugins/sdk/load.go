package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
)

// ExecutablePrefix starts every provider plugin's file name.
const ExecutablePrefix = "krops-provider-"

// ReattachEnv holds {"<name>": <reattach config>} for plugins started by a
// developer (see DebugEnv); the host attaches instead of starting them.
const ReattachEnv = "KROPS_REATTACH_PROVIDERS"

// LoadOptions say where to find a plugin and how to run it.
type LoadOptions struct {
	// Path is an explicit executable ([providers.<name>].path); it skips
	// discovery.
	Path string
	// SHA256 pins the executable's digest ([providers.<name>].sha256).
	SHA256 string
	// PluginDir is --plugin-dir / KROPS_PLUGIN_DIR, searched first.
	PluginDir string
	// RepoRoot's bin/ is searched second.
	RepoRoot string
	// ExecutableDir, the running binary's own directory, is searched
	// third: the plugins `task build` or a release put beside it, when the
	// configuration (and so RepoRoot) lives elsewhere.
	ExecutableDir string
	// DataHome is $XDG_DATA_HOME (default ~/.local/share); its
	// krops/plugins is searched fourth.
	DataHome string
	// SearchPath is the PATH searched last; empty means $PATH.
	SearchPath string
	// Versions are the protocol versions the host speaks; default {1}.
	Versions []int
	// Stderr receives the plugin's logs, re-levelled; default os.Stderr.
	Stderr io.Writer
	// Level is the lowest plugin log level shown; default info.
	Level hclog.Level
	// StartTimeout bounds the handshake; default 10 s.
	StartTimeout time.Duration
	// BaseEnv is the plugin process's whole environment (the plugin gets its
	// declared variables through Configure, not here); default PATH, HOME,
	// TMPDIR and the XDG and locale variables of the host.
	BaseEnv []string
	// Reattach is the value of KROPS_REATTACH_PROVIDERS; empty means none.
	Reattach string
	// Stdout receives anything the plugin prints to stdout after its
	// handshake (a protocol violation); default discarded.
	Stdout io.Writer
}

// StartError is a plugin that could not be started or handshaken.
type StartError struct {
	Plugin, Path string
	Err          error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("starting provider plugin %s (%s): %v", e.Plugin, e.Path, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Load finds, verifies, starts and describes the provider plugin name. The
// caller must Close the client; a host main also defers
// plugin.CleanupClients via sdk.CleanupClients.
func Load(ctx context.Context, name string, o LoadOptions) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Level == hclog.NoLevel {
		o.Level = hclog.Info
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "provider." + name, Output: o.Stderr, Level: o.Level})
	versions := o.Versions
	if len(versions) == 0 {
		versions = []int{ProtocolVersion}
	}
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		sets[v] = plugin.PluginSet{pluginName: &grpcPlugin{version: v}}
	}
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  handshake(),
		VersionedPlugins: sets,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Managed:          true,
		Logger:           logger,
		StartTimeout:     o.StartTimeout,
		SyncStdout:       o.Stdout,
		SyncStderr:       o.Stderr,
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	path := "(reattached)"
	started := &launch{}
	if rc, ok, err := reattachFor(name, o.Reattach); err != nil {
		return nil, err
	} else if ok {
		cfg.Reattach = rc
		// go-plugin does not negotiate on reattach: pick the set itself.
		set, known := sets[rc.ProtocolVersion]
		if !known {
			return nil, fmt.Errorf("%s[%s] speaks protocol %d; this host speaks %v", ReattachEnv, name, rc.ProtocolVersion, versions)
		}
		cfg.Plugins = set
	} else {
		var err error
		if path, err = Find(name, o); err != nil {
			return nil, err
		}
		if _, err := verify(name, path, o.SHA256); err != nil {
			return nil, err
		}
		env := o.BaseEnv
		if env == nil {
			env = baseEnv()
		}
		var check func() error
		if o.SHA256 != "" {
			// Verified above with a clear message; checked again right
			// before exec.
			check = func() error { _, err := verify(name, path, o.SHA256); return err }
		}
		cfg.RunnerFunc = runnerFunc(started, path, env, check)
		cfg.SkipHostEnv = true
	}
	pc := plugin.NewClient(cfg)
	kill := func() {
		pc.Kill()
		launches.Delete(started)
	}
	rpcClient, err := startPlugin(ctx, pc, started, kill)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &StartError{Plugin: name, Path: path, Err: fmt.Errorf("interrupted during the handshake: %w", ctx.Err())}
		}
		err = explainStart(err, versions, started.runner())
		kill()
		return nil, &StartError{Plugin: name, Path: path, Err: err}
	}
	raw, err := rpcClient.Dispense(pluginName)
	if err != nil {
		kill()
		return nil, &StartError{Plugin: name, Path: path, Err: err}
	}
	c, err := newClient(name, path, raw.(pb.ProviderClient), kill)
	if err != nil {
		kill()
		return nil, err
	}
	c.desc.ProtocolVersion = pc.NegotiatedVersion()
	if r := started.runner(); r != nil {
		c.pid = r.Pid()
	} else if rc := pc.ReattachConfig(); rc != nil {
		c.pid = rc.Pid
	}
	return c, nil
}

// CleanupClients kills every plugin this process started. Every host main
// defers it, so no exit path leaves a plugin behind.
func CleanupClients() { plugin.CleanupClients() }

// startPlugin starts the plugin and waits for its handshake, or for ctx: an
// interrupt kills the plugin's group at once instead of waiting out the
// start timeout.
func startPlugin(ctx context.Context, pc *plugin.Client, l *launch, kill func()) (plugin.ClientProtocol, error) {
	type result struct {
		c   plugin.ClientProtocol
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := pc.Client()
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		l.stop()
		// The group is dead; go-plugin notices within the pipe grace.
		// Waiting that long lets it remove its socket directory too.
		select {
		case <-done:
		case <-time.After(2 * pipeGrace):
		}
		go kill()
		return nil, ctx.Err()
	}
}

// stderrLines is how much of a dead plugin's stderr an error quotes.
const stderrLines = 8

func explainStart(err error, versions []int, r *groupRunner) error {
	msg := err.Error()
	lower := strings.ToLower(msg)
	if r != nil {
		if how, ok := r.exitedEarly(time.Second); ok {
			tail := r.stderrTail(stderrLines)
			if len(tail) == 0 {
				return fmt.Errorf("%s before its handshake, writing nothing to stderr", how)
			}
			return fmt.Errorf("%s before its handshake; the last lines of its stderr:\n    %s", how, strings.Join(tail, "\n    "))
		}
	}
	switch {
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return fmt.Errorf("it wrote to stdout before its handshake (plugins must log to stderr only): %w", err)
	case strings.Contains(lower, "incompatible api version"):
		return fmt.Errorf("no common protocol version (this host speaks %v): %w", versions, err)
	case strings.Contains(msg, "timeout"):
		return fmt.Errorf("no handshake within the start timeout; is it a krops provider plugin? %w", err)
	}
	return err
}

// Find locates krops-provider-<name>: the explicit path, then PluginDir,
// RepoRoot/bin, DataHome/krops/plugins, then the search path.
func Find(name string, o LoadOptions) (string, error) {
	if o.Path != "" {
		p := o.Path
		if !filepath.IsAbs(p) && o.RepoRoot != "" {
			p = filepath.Join(o.RepoRoot, p)
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return "", refused("provider plugin %s: bootstrap.toml [providers.%s] path = %q, and %s does not exist: build it there or fix the path", name, name, o.Path, p)
		}
		return p, checkFile(name, p)
	}
	file := ExecutablePrefix + name
	var dirs []string
	if o.PluginDir != "" {
		dirs = append(dirs, o.PluginDir)
	}
	if o.RepoRoot != "" {
		dirs = append(dirs, filepath.Join(o.RepoRoot, "bin"))
	}
	if o.ExecutableDir != "" && !slices.Contains(dirs, filepath.Clean(o.ExecutableDir)) {
		dirs = append(dirs, filepath.Clean(o.ExecutableDir))
	}
	dataHome := o.DataHome
	if dataHome == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dataHome = filepath.Join(home, ".local", "share")
		}
	}
	if dataHome != "" {
		dirs = append(dirs, filepath.Join(dataHome, "krops", "plugins"))
	}
	search := o.SearchPath
	if search == "" {
		search = os.Getenv("PATH")
	}
	searched := append([]string{}, dirs...)
	for _, d := range dirs {
		p := filepath.Join(d, file)
		if _, err := os.Lstat(p); err == nil {
			if err := checkDir(name, d); err != nil {
				return "", err
			}
			return p, checkFile(name, p)
		}
	}
	for _, d := range filepath.SplitList(search) {
		if d == "" {
			continue
		}
		searched = append(searched, d)
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, checkFile(name, p)
		}
	}
	return "", refused("provider plugin %s not found: no executable %s in %s; build it (task build) or set --plugin-dir / KROPS_PLUGIN_DIR", name, file, strings.Join(searched, ", "))
}

// ErrPluginRefused marks a plugin the host will not run (not found, a
// symlinked directory, a writable or non-executable file, a hash that does
// not match its pin): a configuration problem, exit code 2.
var ErrPluginRefused = errors.New("provider plugin refused")

type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return ErrPluginRefused }

// ExitCode is the krops exit code of a refusal: a configuration problem.
func (r refusal) ExitCode() int { return 2 }

func refused(format string, args ...any) error { return refusal{fmt.Sprintf(format, args...)} }

// checkDir refuses a plugin directory that someone other than the user
// could redirect or fill: whoever controls it controls which code runs with
// cloud credentials. The path is cleaned and made absolute first ("link/"
// must not pass where "link" is refused). Then:
//   - the directory itself must be no symlink and not world-writable;
//   - its parents, up to the topmost one the user owns (their home, a
//     checkout), must be no symlinks either: a symlinked parent redirects
//     the directory as surely as a symlinked directory;
//   - no parent may be world-writable without the sticky bit (/tmp is
//     fine: nobody can rename another user's entry in it).
//
// Symlinks above the user's own part of the tree (/bin -> usr/bin,
// macOS's /tmp -> private/tmp) belong to root, who can replace the plugin
// anyway.
func checkDir(name, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("provider plugin %s: plugin directory %s: %w", name, dir, err)
	}
	st, err := os.Lstat(abs)
	if err != nil {
		return fmt.Errorf("provider plugin %s: plugin directory %s: %w", name, abs, err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return refused("provider plugin %s: plugin directory %s is a symlink; refusing it (point --plugin-dir at the real directory)", name, abs)
	}
	if st.Mode().Perm()&0o002 != 0 {
		return refused("provider plugin %s: plugin directory %s is world-writable (mode %v): anyone could put a plugin there; refusing it (chmod o-w %s)", name, abs, st.Mode().Perm(), abs)
	}
	uid := os.Getuid()
	owned := owner(st) == uid
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("provider plugin %s: plugin directory %s: parent %s: %w", name, abs, p, err)
		}
		// The user's part of the tree is the run of parents they own,
		// starting at the directory; it ends at the first one they don't.
		owned = owned && owner(st) == uid
		if owned && st.Mode()&os.ModeSymlink != 0 {
			return refused("provider plugin %s: plugin directory %s has a symlinked parent %s; refusing it (use the real path: %s)", name, abs, p, realPath(abs))
		}
		if st.IsDir() && st.Mode().Perm()&0o002 != 0 && st.Mode()&os.ModeSticky == 0 {
			return refused("provider plugin %s: plugin directory %s is inside %s, which is world-writable without the sticky bit (mode %v): anyone could swap the directory; refusing it", name, abs, p, st.Mode())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func owner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// realPath is the symlink-free spelling of p for an error message.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// checkFile refuses plugin files anyone may rewrite.
func checkFile(name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("provider plugin %s: %w", name, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return refused("provider plugin %s: %s is not an executable file", name, path)
	}
	if st.Mode()&0o002 != 0 {
		return refused("provider plugin %s: %s is world-writable (mode %v); refusing to run it: chmod o-w %s", name, path, st.Mode().Perm(), path)
	}
	return nil
}

// verify hashes the plugin and compares it with the pin, returning the digest.
func verify(name, path, pin string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("provider plugin %s: %w", name, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("provider plugin %s: hashing %s: %w", name, path, err)
	}
	sum := h.Sum(nil)
	if pin != "" && !strings.EqualFold(hex.EncodeToString(sum), pin) {
		return nil, refused("provider plugin %s: %s has SHA256 %s but bootstrap.toml [providers.%s] pins %s; refusing to run it (rebuild the pinned version or update the pin)", name, path, hex.EncodeToString(sum), name, strings.ToLower(pin))
	}
	return sum, nil
}

func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "USER", "LANG", "LC_ALL", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// reattach is the JSON shape of one KROPS_REATTACH_PROVIDERS entry.
type reattach struct {
	Protocol        string
	ProtocolVersion int
	Pid             int
	Addr            struct{ Network, String string }
}

func reattachFromConfig(rc *plugin.ReattachConfig) reattach {
	var r reattach
	r.Protocol = string(rc.Protocol)
	r.ProtocolVersion = rc.ProtocolVersion
	r.Pid = rc.Pid
	r.Addr.Network = rc.Addr.Network()
	r.Addr.String = rc.Addr.String()
	return r
}

func reattachFor(name, raw string) (*plugin.ReattachConfig, bool, error) {
	if raw == "" {
		return nil, false, nil
	}
	var all map[string]reattach
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		return nil, false, fmt.Errorf("%s is not valid JSON ({\"<name>\": {...}} as printed by a plugin in debug mode): %w", ReattachEnv, err)
	}
	r, ok := all[name]
	if !ok {
		return nil, false, nil
	}
	var addr net.Addr
	switch r.Addr.Network {
	case "unix":
		addr = &net.UnixAddr{Name: r.Addr.String, Net: "unix"}
	case "tcp":
		a, err := net.ResolveTCPAddr("tcp", r.Addr.String)
		if err != nil {
			return nil, false, fmt.Errorf("%s[%s]: %w", ReattachEnv, name, err)
		}
		addr = a
	default:
		return nil, false, fmt.Errorf("%s[%s]: unknown network %q", ReattachEnv, name, r.Addr.Network)
	}
	return &plugin.ReattachConfig{Protocol: plugin.Protocol(r.Protocol), ProtocolVersion: r.ProtocolVersion, Pid: r.Pid, Addr: addr, Test: true}, true, nil
}
