// Command krops-standin-helmcontroller is a STAND-IN for Flux's
// helm-controller in the real-engine lane's images
// (tools/realengine/images.sh): the Go module proxy here serves
// helm-controller's API module but not the controller's, so the lane has no
// image of the real one.
//
// Unlike krops-standin-controller it does the work: it reconciles
// HelmReleases (helm.toolkit.fluxcd.io/v2) with the Helm SDK, so what the
// local-host tree installs as HelmReleases (cert-manager, the Cluster API
// operator, Podinfo) really gets installed, upgraded and uninstalled:
//
//   - the chart comes from source-controller, as the real controller takes
//     it: spec.chartRef names an OCIRepository or HelmChart whose artifact
//     is the chart; spec.chart makes the HelmChart <namespace>-<name> in the
//     source's namespace and waits for source-controller to build it. The
//     artifact is downloaded from its status URL and its digest checked.
//   - values are spec.valuesFrom (ConfigMaps and Secrets, in order) under
//     spec.values; releaseName, targetNamespace, storageNamespace,
//     install.createNamespace, install/upgrade.crds (Skip, Create,
//     CreateReplace), timeout, dependsOn and suspend are honoured.
//   - status carries what `flux get helmreleases` and kstatus read: the
//     Ready and Released conditions, observedGeneration, history and the
//     lastAttempted* fields.
//   - the finalizer finalizers.fluxcd.io uninstalls the release when the
//     HelmRelease is deleted, which is how a Flux prune removes a release.
//   - spec.kubeConfig.secretRef puts the release into another cluster
//     (a Cluster API kubeconfig Secret: key "value", or the key named).
//
// Not implemented (the local-host tree uses none): drift detection, tests,
// rollback and remediation (a failed release is retried every
// --retry-interval), postRenderers, valuesFrom targetPath,
// kubeConfig.configMapRef and serviceAccountName, charts from
// GitRepository or Bucket sources.
//
// --stands-in-for=helm-controller may come first; every other argument is
// the real controller's and is ignored.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := log.New(os.Stderr, "", log.LstdFlags|log.LUTC)
	logger.Print("STAND-IN for helm-controller (krops real-engine lane): reconciles HelmReleases with the Helm SDK")
	if err := run(ctx, logger, os.Args[1:]); err != nil {
		logger.Print(err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *log.Logger, args []string) error {
	fs := flag.NewFlagSet("krops-standin-helmcontroller", flag.ContinueOnError)
	retry := fs.Duration("retry-interval", 30*time.Second, "how long a failed release waits before the next attempt")
	var known []string
	// The Flux manifests pass the real controller's flags (--watch-all-namespaces,
	// --log-level, --events-addr, ...): only the stand-in's own are parsed.
	for _, a := range args {
		if name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-"); fs.Lookup(name) != nil && strings.Contains(a, "=") {
			known = append(known, a)
		}
	}
	if err := fs.Parse(known); err != nil {
		return err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster configuration: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	go serveProbes(ctx, logger)
	r := newReconciler(dyn, "", logger)
	r.retryAfter = *retry
	for {
		if err := r.pass(ctx); err != nil && ctx.Err() == nil {
			logger.Print(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// serveProbes answers the health and metrics ports the Flux manifests give
// helm-controller.
func serveProbes(ctx context.Context, logger *log.Logger) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	health := http.NewServeMux()
	health.Handle("/healthz", ok)
	health.Handle("/readyz", ok)
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", ok)
	for _, s := range []*http.Server{{Addr: ":9440", Handler: health}, {Addr: ":8080", Handler: metrics}} {
		s.ReadHeaderTimeout = 10 * time.Second
		go func() {
			<-ctx.Done()
			_ = s.Close()
		}()
		go func() {
			if err := s.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				logger.Printf("%s: %v", s.Addr, err)
			}
		}()
	}
}
