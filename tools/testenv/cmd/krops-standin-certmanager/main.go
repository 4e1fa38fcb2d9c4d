// Command krops-standin-certmanager is a STAND-IN for cert-manager's four
// programs (controller, webhook, cainjector, startupapicheck) in the
// real-engine lane's images (tools/realengine/images.sh): the Go module
// proxy here serves cert-manager's library module, whose chart the lane
// installs unchanged, but not the modules of its programs.
//
// Unlike the Flux stand-ins it really does the work the chart's objects
// expect, so everything that depends on cert-manager runs for real on top
// of it:
//
//   - controller: Issuers and ClusterIssuers of kind selfSigned and ca
//     become Ready; each Certificate they sign becomes its kubernetes.io/tls
//     Secret (tls.crt, tls.key, ca.crt), reissued when its DNS names or
//     issuer change, and the Certificate Ready.
//   - webhook: serves the chart's validating and mutating webhooks over TLS
//     from a CA it keeps in the Secret the chart names (as the real
//     webhook's dynamic serving does) and admits every request.
//   - cainjector: copies ca.crt into the caBundle of webhook configurations,
//     CRD conversion webhooks and APIServices annotated
//     cert-manager.io/inject-ca-from or inject-ca-from-secret.
//   - startupapicheck: creates a CertificateRequest with dryRun until the API
//     answers through the webhook, as `check api --wait` does.
//
// ACME, Vault and the other issuer kinds, renewal before expiry and the
// CertificateRequest flow are not implemented: the local-host tree uses
// none of them.
//
// The first argument names the program (--stands-in-for=NAME); the chart's
// arguments follow and only those named in each role are read.
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], "--stands-in-for=") {
		fmt.Fprintln(os.Stderr, "usage: krops-standin-certmanager --stands-in-for=controller|webhook|cainjector|startupapicheck [cert-manager's arguments]")
		os.Exit(2)
	}
	role := strings.TrimPrefix(os.Args[1], "--stands-in-for=")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := log.New(os.Stderr, role+": ", log.LstdFlags|log.LUTC)
	logger.Printf("STAND-IN for cert-manager's %s (krops real-engine lane)", role)
	if err := run(ctx, logger, role, os.Args[2:]); err != nil {
		logger.Print(err)
		os.Exit(1)
	}
}

// options are the cert-manager arguments the stand-in reads; the rest are
// accepted and ignored.
type options struct {
	clusterResourceNamespace string
	securePort               int
	caSecretNamespace        string
	caSecretName             string
	dnsNames                 []string
	wait                     time.Duration
}

func parse(role string, args []string) (options, error) {
	o := options{clusterResourceNamespace: os.Getenv("POD_NAMESPACE"), securePort: 10250, wait: time.Minute}
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", o.clusterResourceNamespace, "")
	fs.IntVar(&o.securePort, "secure-port", o.securePort, "")
	fs.StringVar(&o.caSecretNamespace, "dynamic-serving-ca-secret-namespace", "", "")
	fs.StringVar(&o.caSecretName, "dynamic-serving-ca-secret-name", "", "")
	fs.Func("dynamic-serving-dns-names", "", func(s string) error {
		o.dnsNames = append(o.dnsNames, strings.Split(s, ",")...)
		return nil
	})
	fs.DurationVar(&o.wait, "wait", o.wait, "")
	var known []string
	// Keep only the flags above: the chart passes many more (--v, --config,
	// leader election) that the stand-in has no use for.
	for _, a := range args {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if fs.Lookup(name) != nil && strings.Contains(a, "=") {
			known = append(known, os.ExpandEnv(a))
		}
	}
	if err := fs.Parse(known); err != nil {
		return o, err
	}
	return o, nil
}

func run(ctx context.Context, logger *log.Logger, role string, args []string) error {
	o, err := parse(role, args)
	if err != nil {
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
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c := clients{dyn: dyn, core: core, logger: logger}
	switch role {
	case "controller":
		go health(ctx, logger, ":9403")
		return loop(ctx, logger, func(ctx context.Context) error { return c.reconcileCertificates(ctx, o) })
	case "cainjector":
		return loop(ctx, logger, c.injectCAs)
	case "webhook":
		return c.serveWebhook(ctx, o)
	case "startupapicheck":
		return c.checkAPI(ctx, o)
	}
	return fmt.Errorf("--stands-in-for=%s: not one of controller, webhook, cainjector, startupapicheck", role)
}

type clients struct {
	dyn    dynamic.Interface
	core   kubernetes.Interface
	logger *log.Logger
}

// loop runs pass every two seconds until ctx ends: a stand-in has no need
// for informers, and a pass over the few objects of a lane is cheap.
func loop(ctx context.Context, logger *log.Logger, pass func(context.Context) error) error {
	for {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			logger.Print(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// health answers the chart's liveness and readiness probes.
func health(ctx context.Context, logger *log.Logger, addr string) {
	mux := http.NewServeMux()
	for _, p := range []string{"/livez", "/healthz", "/readyz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	}
	s := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()
	if err := s.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		logger.Printf("health %s: %v", addr, err)
	}
}
