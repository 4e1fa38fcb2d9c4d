package seed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kropsdev/krops/tools/kit/capikubeconfig"
	"github.com/kropsdev/krops/tools/kit/kubewait"
)

// WorkloadError says which workload cluster's wait failed.
type WorkloadError struct {
	Cluster string
	Err     error
}

func (e *WorkloadError) Error() string { return "workload cluster " + e.Cluster + ": " + e.Err.Error() }
func (e *WorkloadError) Unwrap() error { return e.Err }

func kustomization(ns, name string) kubewait.Target {
	return kubewait.Target{Resource: Kustomizations, Kind: "Kustomization", Namespace: ns, Name: name}
}

// waitChain follows Flux until it has taken over: the FluxInstance and the
// environment's Kustomizations on the seeded cluster, then each workload
// cluster's own flux-system.
func waitChain(ctx context.Context, o Options, kc kubernetes.Interface, dyn dynamic.Interface) error {
	p := o.Progress
	targets := []kubewait.Target{{Resource: fluxInstances, Kind: "FluxInstance", Namespace: o.Namespace, Name: FluxInstanceName}}
	for _, k := range o.Wait {
		targets = append(targets, kustomization(o.Namespace, k))
	}
	err := p.Wait(ctx, fmt.Sprintf("waiting for Flux to take over (up to %s)", o.WaitTimeout), func(ctx context.Context) error {
		return follow(ctx, o, kc, dyn, o.WaitTimeout, o.Silence, targets...)
	})
	if err != nil {
		return blockedToo(ctx, dyn, o.Namespace, err)
	}
	for _, w := range o.Workloads {
		if err := waitWorkload(ctx, o, kc, dyn, w); err != nil {
			return &WorkloadError{Cluster: w, Err: err}
		}
	}
	return nil
}

// waitWorkload waits for the kubeconfig Secret Cluster API writes for the
// workload cluster, then, through it, for the cluster's flux-system
// Kustomization. One deadline covers both.
func waitWorkload(ctx context.Context, o Options, kc kubernetes.Interface, dyn dynamic.Interface, cluster string) error {
	p := o.Progress
	return p.Wait(ctx, fmt.Sprintf("waiting for workload cluster %s's Flux (up to %s)", cluster, o.WaitTimeout), func(ctx context.Context) error {
		// The deadline is kept here, not in ctx: kubewait tells its own
		// timeout (which names what blocks) from the caller's cancel.
		deadline := time.Now().Add(o.WaitTimeout)
		secret := capikubeconfig.Target(o.WorkloadNamespace, cluster)
		if err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: o.WaitTimeout, Silence: o.Silence}, secret); err != nil {
			return err
		}
		raw, err := capikubeconfig.Read(ctx, kc, o.WorkloadNamespace, cluster)
		if err != nil {
			return err
		}
		server := ""
		if o.Endpoint != nil {
			if server, err = o.Endpoint(ctx, cluster, raw); err != nil {
				return fmt.Errorf("the provider's endpoint for Cluster %s: %w", cluster, err)
			}
		}
		cfg, err := capikubeconfig.RESTConfig(raw, server)
		if err != nil {
			return fmt.Errorf("the kubeconfig of Cluster %s: %w", cluster, err)
		}
		p.Infof("reaching %s at %s", cluster, cfg.Host)
		wkc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		wdyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		// At least a moment: a zero timeout would mean none at all.
		left := max(time.Until(deadline), time.Millisecond)
		err = follow(ctx, o, wkc, wdyn, left, 0, kustomization(o.Namespace, "flux-system"))
		var te *kubewait.TimeoutError
		if errors.As(err, &te) {
			te.Timeout = o.WaitTimeout
		}
		return err
	})
}

// follow waits for targets on one cluster, streaming Flux's warnings and
// reporting progress as it changes; silence, when set, ends it once the
// cluster stops answering.
func follow(ctx context.Context, o Options, kc kubernetes.Interface, dyn dynamic.Interface, timeout, silence time.Duration, targets ...kubewait.Target) error {
	p := o.Progress
	events, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); streamWarnings(events, kc, o.Namespace, p) }()
	defer func() { stop(); <-done }()
	return kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: timeout, Silence: silence, Report: func(line string) { p.Infof("%s", line) }}, targets...)
}

// blockedToo adds, to a wait that ran out, every other Kustomization in ns
// that is not Ready: the one that blocks a chain is often not the one
// waited for (a dependency further up).
func blockedToo(ctx context.Context, dyn dynamic.Interface, ns string, err error) error {
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) || ctx.Err() != nil {
		return err
	}
	others, lerr := kubewait.NotReady(ctx, dyn, kustomization(ns, ""), ns)
	if lerr != nil {
		return err
	}
	for _, s := range others {
		if !slices.ContainsFunc(te.Blocking, func(b kubewait.State) bool { return b.Target == s.Target }) {
			te.Blocking = append(te.Blocking, s)
		}
	}
	return err
}
