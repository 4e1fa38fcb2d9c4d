package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// DefaultFile is the configuration file name looked up in the working
// directory when BOOTSTRAP_CONFIG is unset.
const DefaultFile = "bootstrap.toml"

// Config is a loaded, validated configuration.
type Config struct {
	File
	// Path is the absolute path of the file that was loaded.
	Path string
	// Root is the directory of Path: every repository-owned relative path in
	// the file is relative to it, wherever the tool was started.
	Root string
	// EnvironmentOrder lists environment names in the order the file declares
	// them, for messages and for deterministic iteration.
	EnvironmentOrder []string
	// raw is the merged configuration (defaults, file, overrides) as a tree
	// with the file's key names, for handing to provider plugins.
	raw map[string]any
	// overriddenBy maps a file key an environment variable set to that
	// variable, so a bad value is reported under the name the user typed.
	overriddenBy map[string]string
	// owned are the keys provider plugins own, set aside at Load.
	owned ownedKeys
	// names are the [bootstrap] names as written, {env} placeholders
	// intact: SelectEnvironment resolves Bootstrap from them.
	names Bootstrap
}

// LoadOptions say where configuration comes from.
type LoadOptions struct {
	// Path is the file to load; empty means BOOTSTRAP_CONFIG from Lookup, then
	// DefaultFile, resolved against WorkDir.
	Path string
	// WorkDir is the caller's working directory; empty means os.Getwd.
	WorkDir string
	// Lookup returns knob values with flags already layered over the
	// environment (see the cli package). Nil means no overrides.
	Lookup Lookup
}

// Lookup returns the value of a knob by its environment-variable name.
// Empty values count as unset, everywhere.
type Lookup func(name string) (string, bool)

// Get returns the knob's non-empty value.
func (l Lookup) Get(name string) (string, bool) {
	if l == nil {
		return "", false
	}
	v, ok := l(name)
	if !ok || v == "" {
		return "", false
	}
	return v, true
}

// overrideKeys maps knobs that override file keys to those keys.
var overrideKeys = []struct{ env, key string }{
	{"KROPS_KIND_CLUSTER", "bootstrap.kind-cluster"},
	{"BOOTSTRAP_KUBECONTEXT", "bootstrap.kind-context"},
	{"KROPS_REGISTRY_NAME", "bootstrap.registry-name"},
}

func defaults() map[string]any {
	return map[string]any{
		"bootstrap.git-branch":        "main",
		"bootstrap.kind-cluster":      "krops-" + EnvPlaceholder,
		"bootstrap.registry-name":     "krops-registry",
		"bootstrap.flux-namespace":    "flux-system",
		"bootstrap.github-pat-secret": "flux-github-pat",
		"bootstrap.sops-age-secret":   "sops-age",
		"bootstrap.mgmt-namespace":    "default",
		"bootstrap.mgmt-context":      "krops-" + EnvPlaceholder + "-mgmt",
	}
}

// Load reads, layers and validates the configuration. Every problem found is
// reported at once, each naming the file and the key.
func Load(opts LoadOptions) (*Config, error) {
	wd := opts.WorkDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("finding the working directory: %w", err)
		}
	}
	path := opts.Path
	if path == "" {
		path, _ = opts.Lookup.Get("BOOTSTRAP_CONFIG")
	}
	if path == "" {
		path = DefaultFile
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(wd, path)
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data, opts.Lookup)
}

// MaxFileSize bounds bootstrap.toml: a real one is a few KiB.
const MaxFileSize = 1 << 20

// readFile reads a configuration file that is a regular file of at most
// MaxFileSize bytes. Anything else (a FIFO, a device such as /dev/zero, a
// directory) is refused before it is opened, so a read can neither block
// nor grow without bound.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("configuration file %s does not exist: run from the repository root or set BOOTSTRAP_CONFIG", path)
	case err != nil:
		return nil, fmt.Errorf("reading configuration file %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("configuration file %s is not a regular file (%s): point BOOTSTRAP_CONFIG at bootstrap.toml", path, fi.Mode().Type())
	case fi.Size() > MaxFileSize:
		return nil, fmt.Errorf("configuration file %s is %d bytes, more than the %d a bootstrap.toml can be", path, fi.Size(), MaxFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration file %s: %w", path, err)
	}
	defer f.Close()
	// The file may have grown since the Stat: read one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading configuration file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("configuration file %s is more than the %d bytes a bootstrap.toml can be", path, MaxFileSize)
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, fmt.Errorf("configuration file %s starts with a UTF-8 byte order mark, which TOML does not allow: save it as UTF-8 without a BOM", path)
	}
	return data, nil
}

func parse(path string, data []byte, lookup Lookup) (*Config, error) {
	fileK := koanf.New(".")
	if err := fileK.Load(rawbytes.Provider(data), toml.Parser()); err != nil {
		return nil, fmt.Errorf("%s: not valid TOML: %w", path, err)
	}
	// The keys provider plugins own go aside (CheckProviderKeys holds them
	// against the plugin's declaration). Unknown keys are checked on the
	// file alone, so the messages name what the user wrote and not what
	// defaults filled in.
	hostRaw, owned := splitOwned(fileK.Raw())
	if errs := checkKeys(path, "", hostRaw, fileType); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	hostK := koanf.New(".")
	if err := hostK.Load(confmap.Provider(hostRaw, "."), nil); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	// k is what the host reads; full keeps the provider-owned keys for the
	// plugin (ProviderJSON).
	k, full := koanf.New("."), koanf.New(".")
	for _, kk := range []*koanf.Koanf{k, full} {
		if err := kk.Load(confmap.Provider(defaults(), "."), nil); err != nil {
			return nil, fmt.Errorf("loading built-in defaults: %w", err)
		}
	}
	if err := k.Merge(hostK); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := full.Merge(fileK); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	over := map[string]any{}
	overriddenBy := map[string]string{}
	for _, o := range overrideKeys {
		if v, ok := lookup.Get(o.env); ok {
			over[o.key] = v
			overriddenBy[o.key] = o.env
		}
	}
	for _, kk := range []*koanf.Koanf{k, full} {
		if err := kk.Load(confmap.Provider(over, "."), nil); err != nil {
			return nil, fmt.Errorf("applying environment overrides: %w", err)
		}
	}

	var f File
	err := k.UnmarshalWithConf("", &f, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			TagName:          "koanf",
			Result:           &f,
			WeaklyTypedInput: false,
			ErrorUnused:      true,
		},
	})
	if err != nil {
		// Every value bootstrap.toml holds is text or a list of text; a
		// bare number or boolean is the usual slip.
		if strings.Contains(err.Error(), "expected type 'string'") {
			return nil, fmt.Errorf("%s: %w\n(write the value in quotes: a duration as \"40m\", a name as \"x\")", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A renamed kind cluster carries its context name along unless the context
	// is given explicitly, the way kind itself names contexts.
	_, clusterOverridden := over["bootstrap.kind-cluster"]
	_, contextOverridden := over["bootstrap.kind-context"]
	if !contextOverridden && (clusterOverridden || f.Bootstrap.KindContext == "") {
		f.Bootstrap.KindContext = "kind-" + f.Bootstrap.KindCluster
	}
	order, err := environmentOrder(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for name, env := range f.Environments {
		env.Name = name
		f.Environments[name] = env
	}
	c := &Config{File: f, Path: path, Root: filepath.Dir(path), EnvironmentOrder: order, raw: full.Raw(), owned: owned, overriddenBy: overriddenBy, names: f.Bootstrap}
	if errs := c.validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}
