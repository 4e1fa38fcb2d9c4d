package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// A provider plugin owns the keys of bootstrap.toml that only it reads: in
// the tables of the environments it serves (beside the host's keys, and in
// their [teardown] tables) and in its own [providers.<name>] table (beside
// path and sha256). The host's schema does not know them. Load sets them
// aside, and when a tool loads the plugin, CheckProviderKeys holds them
// against the keys the plugin declares (sdk.Description.ConfigKeys): an
// undeclared key is refused there, naming the file and the key, before
// Configure checks the values. A typo in a host key is still refused at
// Load.

// Scopes of a declared key: `environments.*.teardown.aws-workloads` is a key
// of every environment the provider serves, `providers.*.teardown.x` a key
// of its own [providers.<name>] table.
const (
	envScope      = "environments.*."
	providerScope = "providers.*."
)

// ownedKeys are the keys set aside at Load, as full dotted paths to their
// leaves (a table's keys, not the table; an array is a leaf).
type ownedKeys struct {
	environment map[string][]string // environment name -> keys
	provider    map[string][]string // provider name -> keys
}

func tagsOf(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("koanf"); tag != "" && tag != "-" {
			out[tag] = true
		}
	}
	return out
}

// splitOwned returns raw without the provider-owned keys, and those keys.
// raw is not changed.
func splitOwned(raw map[string]any) (map[string]any, ownedKeys) {
	owned := ownedKeys{environment: map[string][]string{}, provider: map[string][]string{}}
	out := maps.Clone(raw)
	if envs, ok := raw["environments"].(map[string]any); ok {
		envKeys, tdKeys := tagsOf(reflect.TypeFor[Environment]()), tagsOf(reflect.TypeFor[EnvTeardown]())
		kept := map[string]any{}
		for name, v := range envs {
			env, ok := v.(map[string]any)
			if !ok {
				kept[name] = v // checkKeys names the mistake
				continue
			}
			prefix := "environments." + name
			env, keys := setAside(env, envKeys, prefix)
			if td, ok := env["teardown"].(map[string]any); ok {
				var tdOwned []string
				env["teardown"], tdOwned = setAside(td, tdKeys, prefix+".teardown")
				keys = append(keys, tdOwned...)
			}
			if len(keys) > 0 {
				sort.Strings(keys)
				owned.environment[name] = keys
			}
			kept[name] = env
		}
		out["environments"] = kept
	}
	if provs, ok := raw["providers"].(map[string]any); ok {
		pinKeys := tagsOf(reflect.TypeFor[Provider]())
		kept := map[string]any{}
		for name, v := range provs {
			p, ok := v.(map[string]any)
			if !ok {
				kept[name] = v
				continue
			}
			var keys []string
			kept[name], keys = setAside(p, pinKeys, "providers."+name)
			if len(keys) > 0 {
				sort.Strings(keys)
				owned.provider[name] = keys
			}
		}
		out["providers"] = kept
	}
	return out, owned
}

// setAside returns table without the keys host does not declare, and the
// dotted paths of those keys' leaves.
func setAside(table map[string]any, host map[string]bool, prefix string) (map[string]any, []string) {
	kept := map[string]any{}
	var keys []string
	for k, v := range table {
		if host[k] {
			kept[k] = v
			continue
		}
		keys = append(keys, leaves(prefix+"."+k, v)...)
	}
	return kept, keys
}

func leaves(key string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{key}
	}
	var out []string
	for k, sub := range m {
		out = append(out, leaves(key+"."+k, sub)...)
	}
	return out
}

// ProviderKeys lists the keys of env's provider that Load set aside: those
// of the environment's table and those of its provider's table.
func (c *Config) ProviderKeys(env string) []string {
	e, ok := c.Environments[env]
	if !ok {
		return nil
	}
	return append(slices.Clone(c.owned.environment[env]), c.owned.provider[e.Provider]...)
}

// CheckProviderKeys refuses each key of env's provider (ProviderKeys) that
// declared, the plugin's sdk.Description.ConfigKeys, does not hold. Each
// error names the file and the key, and what the provider declares.
func (c *Config) CheckProviderKeys(env string, declared []string) error {
	e, ok := c.Environments[env]
	if !ok {
		return fmt.Errorf("unknown environment %q (known: %s)", env, c.knownEnvironments())
	}
	var errs []error
	for _, key := range c.ProviderKeys(env) {
		if declaredKey(key, env, e.Provider, declared) {
			continue
		}
		what := "provider " + e.Provider + " adds none"
		if len(declared) > 0 {
			what = "provider " + e.Provider + " adds " + strings.Join(declared, ", ")
		}
		table, host := hostKeysAround(key, env, e.Provider)
		errs = append(errs, fmt.Errorf("%s: unknown key %q in [%s] (krops reads: %s; %s): a typo, or a key of another provider?", c.Path, key, table, strings.Join(host, ", "), what))
	}
	return errors.Join(errs...)
}

// declaredKey says whether key (a full path such as
// environments.aws.teardown.aws-workloads[...] or providers.aws.x.y) is,
// or lies under, a declared key of its scope.
func declaredKey(key, env, provider string, declared []string) bool {
	var rel, scope string
	switch {
	case strings.HasPrefix(key, "environments."+env+"."):
		rel, scope = strings.TrimPrefix(key, "environments."+env+"."), envScope
	case strings.HasPrefix(key, "providers."+provider+"."):
		rel, scope = strings.TrimPrefix(key, "providers."+provider+"."), providerScope
	default:
		return false
	}
	for _, d := range declared {
		d, ok := strings.CutPrefix(d, scope)
		if ok && (rel == d || strings.HasPrefix(rel, d+".")) {
			return true
		}
	}
	return false
}

// hostKeysAround names the table key sits in and the keys krops reads
// there, in schema order.
func hostKeysAround(key, env, provider string) (string, []string) {
	table, t := "environments."+env, reflect.TypeFor[Environment]()
	switch {
	case strings.HasPrefix(key, "environments."+env+".teardown."):
		table, t = table+".teardown", reflect.TypeFor[EnvTeardown]()
	case strings.HasPrefix(key, "providers."):
		table, t = "providers."+provider, reflect.TypeFor[Provider]()
	}
	var names []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("koanf"); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return table, names
}
