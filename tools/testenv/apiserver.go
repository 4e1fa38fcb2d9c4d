package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// quietControllerRuntime silences controller-runtime's process-wide logger,
// which otherwise prints a stack trace complaining that it was never set.
var quietControllerRuntime sync.Once

// startAttempts is how many fresh environments a start may use: envtest
// retries a server that did not answer in time, but not a start that gave
// up later (the default namespace's fixed 5 s), and each retry of its own
// runs under the same load that made the first one fail.
const startAttempts = 3

// controlPlaneStartTimeout bounds one start of etcd and one of
// kube-apiserver on a loaded machine.
const controlPlaneStartTimeout = 3 * time.Minute

// HowToGetAPIServer is the hint shown when KUBEBUILDER_ASSETS is unset.
const HowToGetAPIServer = "run `tools/task.sh testbin` once (plain `go test` then finds the binaries), or set KUBEBUILDER_ASSETS to the directory tools/testbin/install.sh prints"

// Cluster is one running kube-apiserver + etcd.
type Cluster struct {
	// Config authenticates as cluster admin.
	Config *rest.Config
	// Kubeconfig is a file holding Config under context Context.
	Kubeconfig string
	Context    string
	// Client is a controller-runtime client on Config.
	Client client.Client
	// WebhookCertDir and WebhookCAData serve admission webhooks on
	// 127.0.0.1 (set with ClusterOptions.Webhooks): a serving certificate
	// and key (tls.crt, tls.key) and the CA that signed them.
	WebhookCertDir string
	WebhookCAData  []byte
	env            *envtest.Environment
	// crdSets are the sets installed, whose own contract labels
	// labelContracts applies.
	crdSets  []CRDSet
	stopOnce sync.Once
	stopErr  error
}

// Stop stops the API server and etcd now (t's cleanup then does nothing):
// for tests in which a cluster goes away, such as kind deleted by a pivot.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.env.Stop() })
	return c.stopErr
}

// ClusterOptions configure APIServer.
type ClusterOptions struct {
	// CRDs to install before the server is handed out.
	CRDs []CRDSet
	// Name is the kubeconfig context name; default "envtest".
	Name string
	// Webhooks prepares a serving certificate for webhook servers that
	// run on 127.0.0.1 (controllers started by the test).
	Webhooks bool
}

// APIServer starts a real kube-apiserver and etcd for t and stops them in
// t.Cleanup. Several may run at once. The processes die with the test binary
// even when it is killed (see shim.go).
func APIServer(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	Integration(t)
	assets := Testbin("KUBEBUILDER_ASSETS")
	if assets == "" {
		MissingTestbin(t, "kube-apiserver and etcd (KUBEBUILDER_ASSETS)", HowToGetAPIServer)
	}
	quietControllerRuntime.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	shims, err := shimDir(assets, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var crdPaths []string
	for _, set := range opts.CRDs {
		crdPaths = append(crdPaths, CRDPaths(t, set)...)
	}
	env, cfg := startEnvironment(t, assets, shims, crdPaths, opts.Webhooks)
	cl := &Cluster{Config: cfg, env: env, crdSets: opts.CRDs}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver and etcd: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client for envtest: %v", err)
	}
	name := opts.Name
	if name == "" {
		name = "envtest"
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := WriteKubeconfig(cfg, name, path); err != nil {
		t.Fatal(err)
	}
	cl.Kubeconfig, cl.Context, cl.Client = path, name, c
	if opts.Webhooks {
		cl.WebhookCertDir, cl.WebhookCAData = env.WebhookInstallOptions.LocalServingCertDir, env.WebhookInstallOptions.LocalServingCAData
	}
	return cl
}

// WriteKubeconfig writes cfg as a kubeconfig file (mode 0600: it holds a
// client key) with one context named name.
func WriteKubeconfig(cfg *rest.Config, name, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// startEnvironment starts etcd and kube-apiserver with the CRDs installed,
// holding a machine-wide start slot, and tries again with a fresh
// environment when a start fails.
func startEnvironment(t testing.TB, assets, shims string, crdPaths []string, webhooks bool) (*envtest.Environment, *rest.Config) {
	t.Helper()
	release := takeStartSlot(t)
	defer release()
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		// Explicit paths: envtest would otherwise prefer KUBEBUILDER_ASSETS
		// over any directory given here and start the real binaries
		// unsupervised.
		env := &envtest.Environment{
			ControlPlane: envtest.ControlPlane{
				APIServer: &envtest.APIServer{Path: filepath.Join(shims, "kube-apiserver")},
				Etcd:      &envtest.Etcd{Path: filepath.Join(shims, "etcd")},
			},
			// The start timeout of etcd and of kube-apiserver each: envtest
			// sets both from this field (20 s when zero), over whatever the
			// ControlPlane's own fields say. In a full run on 2 cores the
			// load reaches 25, where a kube-apiserver start needs well over
			// 20 s of wall time, and every retry of envtest's (5) and of ours
			// then timed out the same way.
			ControlPlaneStartTimeout: controlPlaneStartTimeout,
			CRDInstallOptions: envtest.CRDInstallOptions{
				Paths:              crdPaths,
				ErrorIfPathMissing: true,
			},
		}
		if webhooks {
			env.WebhookInstallOptions = envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
		}
		cfg, err := env.Start()
		if err == nil {
			return env, cfg
		}
		// A start that gave up leaves etcd and kube-apiserver running
		// unless stopped here.
		_ = env.Stop()
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		t.Logf("starting kube-apiserver and etcd, attempt %d of %d: %v", attempt, startAttempts, err)
	}
	t.Fatalf("starting kube-apiserver and etcd from %s: %v", assets, errors.Join(errs...))
	return nil, nil
}
