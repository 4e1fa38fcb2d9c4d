// Package pivoted tells whether the management cluster a kubeconfig names
// already holds what an earlier pivot moved into it.
//
// A bootstrap that builds a new kind cluster next to such a management
// cluster runs a second Flux and a second Cluster API from the same tree:
// they provision the management and workload Clusters again, under the same
// names, in the same account. So krops-kind refuses to create kind until
// that cluster is torn down, or its context is removed by someone who knows
// it is gone.
package pivoted

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/runmeta"
)

// State is what the management context says about an earlier pivot.
type State int

const (
	// None: the kubeconfig has no management context, so no pivot from
	// this machine wrote one (teardown removes it with the cluster).
	None State = iota
	// Pivoted: the management cluster answers and carries a run's
	// metadata, which the pivot writes after the move.
	Pivoted
	// NotYet: it answers without run metadata; a pivot into it did not
	// get past its move.
	NotYet
	// Unknown: the context is there and the cluster does not answer, or
	// answers with an error other than "not found".
	Unknown
)

// Options name the management cluster as the environment configures it.
type Options struct {
	Cluster kubecfg.Ref
	// FluxNamespace holds the run metadata ConfigMap.
	FluxNamespace string
	// Timeout bounds each request (kubecfg.ProbeTimeout when zero).
	Timeout time.Duration
}

// Finding is the answer of Look.
type Finding struct {
	State State
	// RunID is the run that pivoted (State Pivoted).
	RunID string
	// Environment is the environment the run metadata names (its
	// runmeta.LabelEnvironment label); empty when an earlier krops wrote it
	// without one.
	Environment string
	// Err is why the state is Unknown.
	Err error
}

// Look reads the management context; only a kubeconfig that cannot be
// read is an error.
func Look(ctx context.Context, o Options) (Finding, error) {
	has, err := kubecfg.HasContext(o.Cluster.Path, o.Cluster.Context)
	if err != nil {
		return Finding{}, fmt.Errorf("the management cluster's kubeconfig (MGMT_KUBECONFIG): %w", err)
	}
	if !has {
		return Finding{State: None}, nil
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = kubecfg.ProbeTimeout
	}
	cfg, err := kubecfg.RESTConfig(o.Cluster.Path, o.Cluster.Context, timeout)
	if err != nil {
		return Finding{State: Unknown, Err: err}, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Finding{State: Unknown, Err: err}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cm, err := cs.CoreV1().ConfigMaps(o.FluxNamespace).Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Finding{State: NotYet}, nil
	case err != nil:
		return Finding{State: Unknown, Err: err}, nil
	}
	env := cm.Labels[runmeta.LabelEnvironment]
	tags, err := runmeta.FromData(cm.Data)
	if err != nil {
		// Somebody's metadata all the same: the cluster is in use.
		return Finding{State: Pivoted, RunID: runmeta.Unknown, Environment: env}, nil
	}
	return Finding{State: Pivoted, RunID: tags.RunID, Environment: env}, nil
}

// ErrPivoted is wrapped by the refusal for a pivoted management cluster.
var ErrPivoted = errors.New("the management cluster holds an earlier pivot")

// CreateKindGuard is the refusal to create a kind cluster for env given f:
// exit 2 for a pivoted management cluster, exit 3 for one that does not
// answer, nil otherwise.
func (f Finding) CreateKindGuard(env string, o Options) error {
	switch f.State {
	case Pivoted:
		// The teardown to advise is that of the environment the cluster
		// belongs to, which need not be the one asked for.
		owner, whose := env, ""
		if f.Environment != "" {
			owner = f.Environment
			if f.Environment != env {
				whose = fmt.Sprintf(" It is environment %s's management cluster, not %s's.", f.Environment, env)
			}
		}
		return cli.UsageError(fmt.Errorf("%w: run %s pivoted into the management cluster behind context %s in %s, and it runs Flux and Cluster API with the Clusters.%s "+
			"A new kind cluster would run a second Cluster API that builds them again, so none was created. "+
			"That environment is live: work on it through that context, or tear it down first (`task teardown ENV=%s`) and bootstrap again",
			ErrPivoted, f.RunID, o.Cluster.Context, o.Cluster.Path, whose, owner))
	case Unknown:
		return cli.UnknownStateError(fmt.Errorf("the management cluster behind context %s in %s does not answer (%v), so it is unknown whether an earlier pivot lives there; no kind cluster was created. "+
			"If it does, a new kind cluster would build its Clusters a second time. Bring it back and tear it down (`task teardown ENV=%s`), "+
			"or, if it is gone for good, remove the context (`kubectl --kubeconfig %s config delete-context %s`) and rerun",
			o.Cluster.Context, o.Cluster.Path, f.Err, env, o.Cluster.Path, o.Cluster.Context))
	}
	return nil
}
