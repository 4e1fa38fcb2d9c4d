package config

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// ProviderJSON is what a provider plugin receives with Configure:
// {"bootstrap": {...}, "environment": {...}, "provider": {...},
// "mirrors": [...]} with the file's kebab-case key names and the effective values (defaults and
// overrides applied, names resolved for env): the environment's whole table
// (the host's keys and the provider's) and the provider's own
// [providers.<name>] table without the host's path and sha256. mirrors are
// the [[mirrors]] kind's nodes use beside the provider's own: a provider
// whose clusters' machines pull through the same mirrors reads them there.
func (c *Config) ProviderJSON(env string) ([]byte, error) {
	if _, ok := c.Environments[env]; !ok {
		return nil, fmt.Errorf("unknown environment %q (known: %s)", env, c.knownEnvironments())
	}
	bootstrap := map[string]any{}
	if b, ok := c.raw["bootstrap"].(map[string]any); ok {
		for k, v := range b {
			bootstrap[k] = v
		}
	}
	// The names as the environment resolves them ({env} replaced), and the
	// derived kind context, which the file may not hold at all.
	names := c.names.ForEnvironment(env)
	bootstrap["kind-cluster"] = names.KindCluster
	bootstrap["kind-context"] = names.KindContext
	bootstrap["mgmt-context"] = names.MgmtContext
	var environment any = map[string]any{}
	if envs, ok := c.raw["environments"].(map[string]any); ok && envs[env] != nil {
		environment = envs[env]
	}
	own := map[string]any{}
	if provs, ok := c.raw["providers"].(map[string]any); ok {
		if p, ok := provs[c.Environments[env].Provider].(map[string]any); ok {
			pins := tagsOf(reflect.TypeFor[Provider]())
			for k, v := range p {
				if !pins[k] {
					own[k] = v
				}
			}
		}
	}
	mirrors := []map[string]any{}
	for _, m := range c.Mirrors {
		mirrors = append(mirrors, map[string]any{"registry": m.Registry, "endpoints": m.Endpoints})
	}
	return json.Marshal(map[string]any{"bootstrap": bootstrap, "environment": environment, "provider": own, "mirrors": mirrors})
}
