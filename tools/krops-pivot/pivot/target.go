package pivot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kropsdev/krops/tools/kit/capikubeconfig"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
)

var listAll = metav1.ListOptions{}

// exportKubeconfig writes the target's kubeconfig to MgmtKubeconfig under
// MgmtContext, with the provider's endpoint when it gives one.
func (r *run) exportKubeconfig(ctx context.Context) error {
	return r.o.Progress.Step(ctx, "kubeconfig "+r.o.MgmtKubeconfig+" (context "+r.o.MgmtContext+")", func(ctx context.Context) error {
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
		if err := kubecfg.Remove(r.o.MgmtKubeconfig, r.o.MgmtContext); err != nil {
			return err
		}
		if err := kubecfg.Merge(r.o.MgmtKubeconfig, raw, r.o.MgmtContext); err != nil {
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

// NodeSummary says where the target's nodes stand.
type NodeSummary struct {
	Total, Ready int
	NotReady     []string
}

// Done: at least one node, all Ready. Zero nodes is waiting (EKS starts
// without nodes), never success and never an error.
func (s NodeSummary) Done() bool { return s.Total > 0 && s.Ready == s.Total }

func (s NodeSummary) String() string {
	if s.Total == 0 {
		return "no nodes yet"
	}
	out := fmt.Sprintf("%d of %d nodes Ready", s.Ready, s.Total)
	if len(s.NotReady) > 0 {
		out += "; not Ready: " + strings.Join(s.NotReady, ", ")
	}
	return out
}

func summarize(nodes map[string]*corev1.Node) NodeSummary {
	var s NodeSummary
	for name, n := range nodes {
		s.Total++
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if ready {
			s.Ready++
		} else {
			s.NotReady = append(s.NotReady, name)
		}
	}
	sort.Strings(s.NotReady)
	return s
}

// waitNodes watches the target's nodes until at least one exists and all
// are Ready.
func (r *run) waitNodes(ctx context.Context) error {
	if err := r.connectTarget(); err != nil {
		return err
	}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("nodes of the management cluster (up to %s)", r.o.NodeTimeout), func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, r.o.NodeTimeout)
		defer cancel()
		nodes := map[string]*corev1.Node{}
		last := ""
		// listed (a list or watch went through) and listErr tell a
		// cluster without Ready nodes from one whose API never answered;
		// the reflector's goroutine sets them.
		var mu sync.Mutex
		var listed bool
		var listErr error
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				list, err := r.dst.kc.CoreV1().Nodes().List(ctx, opts)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					// A relist replaces what the watch built up.
					clear(nodes)
					listed = true
				} else {
					listErr = err
				}
				return list, err
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				// With the streaming list (WatchListClient), the
				// reflector starts here, not with a list.
				w, err := r.dst.kc.CoreV1().Nodes().Watch(ctx, opts)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					listed = true
				} else {
					listErr = err
				}
				return w, err
			},
		}
		report := func() NodeSummary {
			s := summarize(nodes)
			if line := s.String(); line != last {
				last = line
				r.o.Progress.Infof("%s", line)
			}
			return s
		}
		_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Node{}, func(store cache.Store) (bool, error) {
			for _, o := range store.List() {
				if n, ok := o.(*corev1.Node); ok {
					nodes[n.Name] = n
				}
			}
			return report().Done(), nil
		}, func(ev watch.Event) (bool, error) {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				return false, nil
			}
			if ev.Type == watch.Deleted {
				delete(nodes, n.Name)
			} else {
				nodes[n.Name] = n
			}
			return report().Done(), nil
		})
		mu.Lock()
		neverAnswered := !listed && listErr != nil
		mu.Unlock()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil && neverAnswered {
			return fmt.Errorf("the management cluster's API did not answer within %s (%w): listing its nodes: %v; kind is kept, rerun the pivot once it answers", r.o.NodeTimeout, ErrUnknownState, listErr)
		}
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			return fmt.Errorf("the management cluster's nodes were not Ready within %s (%s); rerun the pivot to go on waiting", r.o.NodeTimeout, summarize(nodes))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s", kubewait.ErrInterrupted, summarize(nodes))
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
		last := ""
		return kubewait.All(ctx, kubewait.Options{Client: r.dst.dyn, Timeout: r.o.ProviderTimeout, OnChange: func(states []kubewait.State) {
			line := kubewait.Summary(states)
			if line != last {
				last = line
				r.o.Progress.Infof("%s", line)
			}
		}}, targets...)
	})
}
