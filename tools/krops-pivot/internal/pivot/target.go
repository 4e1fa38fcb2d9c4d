package pivot

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kropsdev/krops/tools/kit/capikubeconfig"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
)

var listAll = metav1.ListOptions{}

// exportKubeconfig writes the target's kubeconfig to MgmtKubeconfig under
// MgmtContext, with the provider's endpoint when it gives one.
func (r *run) exportKubeconfig(ctx context.Context) error {
	return r.o.Progress.Step(ctx, "kubeconfig "+r.o.Target.Path+" (context "+r.o.Target.Context+")", func(ctx context.Context) error {
		raw, err := capikubeconfig.Read(ctx, r.src.kc, r.o.Namespace, r.o.MgmtCluster)
		if err != nil {
			return err
		}
		server := ""
		if r.o.Endpoint != nil {
			if server, err = r.o.Endpoint(ctx, raw); err != nil {
				return fmt.Errorf("the provider's endpoint for %s: %w", r.o.MgmtCluster, err)
			}
		}
		if server != "" {
			if raw, err = withServer(raw, server); err != nil {
				return err
			}
			r.o.Progress.Infof("endpoint rewritten to %s (the recorded one is reachable only inside the provider's network)", server)
		}
		if err := kubecfg.Remove(r.o.Target.Path, r.o.Target.Context); err != nil {
			return err
		}
		if err := kubecfg.Merge(r.o.Target.Path, raw, r.o.Target.Context); err != nil {
			return err
		}
		r.dst = nil
		return r.connectTarget()
	})
}

func withServer(raw []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("reading the Cluster API kubeconfig: %w", err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[kctx.Cluster] == nil {
		return nil, errors.New("the Cluster API kubeconfig has no current context")
	}
	cfg.Clusters[kctx.Cluster].Server = server
	return clientcmd.Write(*cfg)
}

// waitNodes watches the target's nodes until at least one exists and all
// are Ready.
func (r *run) waitNodes(ctx context.Context) error {
	if err := r.connectTarget(); err != nil {
		return err
	}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("nodes of the management cluster (up to %s)", r.o.NodeTimeout), func(ctx context.Context) error {
		err := kubewait.NodesReady(ctx, kubewait.Options{Client: r.dst.dyn, Timeout: r.o.NodeTimeout, Silence: r.o.QueryTimeout, Report: r.infof})
		var noAnswer *kubewait.NoAnswerError
		var notReady *kubewait.NodesTimeoutError
		var silent *kubewait.SilentError
		switch {
		case errors.As(err, &silent):
			return fmt.Errorf("the management cluster's API server stopped answering while the pivot waited for its nodes (%w): %v; kind is kept, rerun the pivot once it answers", ErrUnknownState, silent)
		case errors.As(err, &noAnswer):
			why := "the call hung"
			if noAnswer.Err != nil {
				why = noAnswer.Err.Error()
			}
			return fmt.Errorf("the management cluster's API did not answer within %s (%w): listing its nodes: %s; kind is kept, rerun the pivot once it answers", r.o.NodeTimeout, ErrUnknownState, why)
		case errors.As(err, &notReady) && errors.Is(err, kubewait.ErrInterrupted):
			return fmt.Errorf("%w: %s", kubewait.ErrInterrupted, notReady.Last)
		case errors.As(err, &notReady):
			return fmt.Errorf("the management cluster's nodes were not Ready within %s (%s); rerun the pivot to go on waiting", r.o.NodeTimeout, notReady.Last)
		}
		return err
	})
}

// installProviders runs the install and waits for every provider object
// the environment declares.
func (r *run) installProviders(ctx context.Context) error {
	if r.o.Install == nil {
		return nil
	}
	var targets []kubewait.Target
	if err := r.o.Progress.Step(ctx, "cert-manager, the Cluster API operator and the providers on the management cluster", func(ctx context.Context) error {
		var err error
		targets, err = r.o.Install(ctx, r.target)
		return err
	}); err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil
	}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("%d providers Ready (up to %s)", len(targets), r.o.ProviderTimeout), func(ctx context.Context) error {
		return kubewait.All(ctx, kubewait.Options{Client: r.dst.dyn, Timeout: r.o.ProviderTimeout, Report: r.infof}, targets...)
	})
}

// infof prints one line of a wait's progress.
func (r *run) infof(line string) { r.o.Progress.Infof("%s", line) }
