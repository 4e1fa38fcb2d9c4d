// Package pluginhost loads the provider plugin of a krops environment the way
// every krops binary does: plugin pins and paths from bootstrap.toml, the
// plugin directory and reattach knobs, and Configure with the environment.
package pluginhost

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
)

// RunOptions are cli.Run's for a binary that starts provider plugins: a
// second Ctrl-C kills them before the forced exit, and every other way out
// closes them while the signals are still watched.
func RunOptions() cli.RunOptions {
	return cli.RunOptions{BeforeForcedExit: sdk.KillPlugins, Cleanup: sdk.CleanupClients}
}

// Options say which environment's provider to load.
type Options struct {
	Config      *config.Config
	Environment *config.Environment
	// Lookup reads knobs (flags over environment) and the values of the
	// variables the plugin declares.
	Lookup config.Lookup
	// Stderr receives plugin logs: warnings and errors, and with Verbose
	// everything down to debug (go-plugin's process lifecycle included).
	Stderr  io.Writer
	Verbose bool
}

// Load starts the environment's provider and configures it. The caller
// closes the client; its main's cli.Run (RunOptions) also closes every
// plugin on the way out.
func Load(ctx context.Context, o Options) (*sdk.Client, error) {
	name := o.Environment.Provider
	pin := o.Config.Providers[name]
	plugDir, _ := o.Lookup.Get("KROPS_PLUGIN_DIR")
	reattach, _ := o.Lookup.Get("KROPS_REATTACH_PROVIDERS")
	// go-plugin logs every plugin start and exit at info; that is noise
	// unless the user asked for detail.
	level := hclog.Warn
	if o.Verbose {
		level = hclog.Debug
	}
	stderr := o.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	// The binary's own directory: where `task build` (bin/) or a release
	// put the plugins beside it (Linux resolves symlinks to it).
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		exeDir = filepath.Dir(exe)
	}
	c, err := sdk.Load(ctx, name, sdk.LoadOptions{
		Path: pin.Path, SHA256: pin.SHA256, PluginDir: plugDir, RepoRoot: o.Config.Root, ExecutableDir: exeDir,
		DataHome: os.Getenv("XDG_DATA_HOME"), Reattach: reattach, Stderr: stderr, Level: level,
	})
	if err != nil {
		return nil, err
	}
	// The keys the host's schema does not know are the plugin's, if it
	// declares them: a typo stops here with the file and the key.
	if err := o.Config.CheckProviderKeys(o.Environment.Name, c.Description().ConfigKeys); err != nil {
		c.Close()
		return nil, configError{err}
	}
	raw, err := o.Config.ProviderJSON(o.Environment.Name)
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Configure(ctx, sdk.Config{Environment: o.Environment.Name, Raw: raw, RepoRoot: o.Config.Root}, o.Lookup.Get); err != nil {
		c.Close()
		// The plugin refused the environment's configuration: fix it (2).
		return nil, configError{fmt.Errorf("%s: provider %s refused the configuration of environment %s: %w", o.Config.Path, name, o.Environment.Name, err)}
	}
	return c, nil
}

// configError is a configuration the plugin refused: exit code 2.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }
func (e configError) ExitCode() int { return 2 }
