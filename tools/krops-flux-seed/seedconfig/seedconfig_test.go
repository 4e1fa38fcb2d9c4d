package seedconfig

import (
	"testing"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
)

type lookup map[string]string

func (l lookup) get(k string) (string, bool) { v, ok := l[k]; return v, ok }

// Inside the toolbox, localhost is the container: the artifact goes to the
// registry by its name on the kind network, unless REGISTRY_HOST says
// otherwise.
func TestLocalRefInAndOutOfTheToolbox(t *testing.T) {
	for _, tc := range []struct {
		toolbox bool
		env     lookup
		want    string
	}{
		{false, lookup{}, "localhost:5001/krops:latest"},
		{true, lookup{}, "krops-registry:5000/krops:latest"},
		{true, lookup{"REGISTRY_HOST": "registry.example"}, "registry.example:5001/krops:latest"},
	} {
		conf := &config.Config{}
		conf.Bootstrap.RegistryName = "krops-registry"
		sel := &cli.Selected{Lookup: tc.env.get, Knobs: &config.Knobs{Toolbox: tc.toolbox, RegistryPort: 5001, OCIRepository: "krops", OCITag: "latest"}, Config: conf}
		if got := LocalRef(sel); got != tc.want {
			t.Errorf("toolbox %v, %v: %s, want %s", tc.toolbox, tc.env, got, tc.want)
		}
	}
}
