package pluginhost

import (
	"context"
	"sync"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Endpoints gives the address a Cluster API cluster is reached at from this
// machine: a recorded endpoint may be reachable only inside the provider's
// network (CAPD's, on the kind network), and the provider knows the one to
// use instead. The plugin is loaded on the first question only; in the
// toolbox, which is on that network, nothing is rewritten.
type Endpoints struct {
	o       Options
	toolbox bool
	mu      sync.Mutex
	c       *sdk.Client
}

// NewEndpoints asks o's provider; toolbox says this process runs in the
// toolbox container.
func NewEndpoints(o Options, toolbox bool) *Endpoints { return &Endpoints{o: o, toolbox: toolbox} }

// Server is the address for cluster, whose kubeconfig is given; "" keeps
// the recorded one.
func (e *Endpoints) Server(ctx context.Context, cluster string, kubeconfig []byte) (string, error) {
	if e.toolbox {
		return "", nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil {
		c, err := Load(ctx, e.o)
		if err != nil {
			return "", err
		}
		e.c = c
	}
	if !e.c.Description().Has(sdk.CapPivotInputs) {
		return "", nil
	}
	in, err := e.c.PivotInputs(ctx, sdk.PivotInputsRequest{Kubeconfig: kubeconfig, Cluster: cluster})
	return in.Server, err
}

// Close stops the plugin, if it was loaded.
func (e *Endpoints) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil {
		e.c.Close()
		e.c = nil
	}
}
