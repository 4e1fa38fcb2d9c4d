package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

var allCRDs = []testenv.CRDSet{testenv.CAPICore, testenv.CAPD, testenv.CAPIOperator, testenv.FluxSource, testenv.FluxKustomize, testenv.FluxHelm, testenv.FluxOperator}

// writeKindInventory writes on kind local-host's Cluster API providers as
// the operator leaves them installed (provider objects with
// status.installedVersion) at the versions mgmt/local-host/capi-providers
// pins, which Flux would have installed there; the e2e tree leaves them out.
func writeKindInventory(t testing.TB, ctx context.Context, c *testenv.Cluster) {
	t.Helper()
	for _, p := range testenv.TreeProviders(t, filepath.Join(repo, "mgmt", "local-host", "capi-providers")) {
		if err := testenv.CreateOperatorProvider(ctx, c, p); err != nil {
			t.Fatal(err)
		}
	}
}

// mgmtLoadBalancer is a STAND-IN for the management cluster's API endpoint
// (CAPD's load balancer container, which the docker provider finds with
// `docker port local-management-lb`). Cluster API provisioned
// local-management on CAPD's in-memory backend, whose API server cannot
// host CRDs or Flux; behind this address is instead the target
// kube-apiserver, fronted with the cluster's own identity: a serving
// certificate signed by the cluster CA Cluster API generated
// (local-management-ca), and client certificates checked against that CA.
// So krops-pivot and krops-sweep use, unchanged, the kubeconfig Cluster API
// wrote. Down and Up take the endpoint away and bring it back (a fault).
type mgmtLoadBalancer struct {
	Port   int
	target *testenv.Cluster
	// ca finds the cluster CA's certificate and key (tls.crt, tls.key).
	ca func(ctx context.Context) (certPEM, keyPEM []byte, err error)

	mu     sync.Mutex
	tlsCfg *tls.Config
	ln     net.Listener
	srv    *http.Server
}

func newMgmtLoadBalancer(t testing.TB, target *testenv.Cluster, ca func(ctx context.Context) ([]byte, []byte, error)) *mgmtLoadBalancer {
	t.Helper()
	tr, err := rest.TransportFor(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	lb := &mgmtLoadBalancer{target: target, ca: ca}
	lb.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: lb.configForClient}}
	if err := lb.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Down)
	return lb
}

// Up listens (again, on the same port after Down).
func (lb *mgmtLoadBalancer) Up() error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lb.Port))
	if err != nil {
		return err
	}
	lb.ln = ln
	lb.Port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: lb.srv.Handler, ReadHeaderTimeout: lb.srv.ReadHeaderTimeout, TLSConfig: lb.srv.TLSConfig}
	lb.srv = srv
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return nil
}

// Down closes the endpoint and every connection through it.
func (lb *mgmtLoadBalancer) Down() {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.ln == nil {
		return
	}
	_ = lb.srv.Close()
	lb.ln = nil
}

func (lb *mgmtLoadBalancer) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.tlsCfg != nil {
		return lb.tlsCfg, nil
	}
	ctx, cancel := context.WithTimeout(hello.Context(), 10*time.Second)
	defer cancel()
	certPEM, keyPEM, err := lb.ca(ctx)
	if err != nil {
		return nil, fmt.Errorf("stand-in load balancer: the cluster CA: %w", err)
	}
	cfg, err := servingConfig(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	lb.tlsCfg = cfg
	return cfg, nil
}

// servingConfig signs a certificate for 127.0.0.1 with the CA and
// requires client certificates the CA signed.
func servingConfig(caCertPEM, caKeyPEM []byte) (*tls.Config, error) {
	caPair, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA's key pair: %w", err)
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, nil
}

// clusterCA reads <cluster>-ca in namespace from the first of clusters
// that answers and has it: kind before the move, the target after.
func clusterCA(namespace, cluster string, clusters func() []*testenv.Cluster) func(ctx context.Context) ([]byte, []byte, error) {
	return func(ctx context.Context) ([]byte, []byte, error) {
		var errs []error
		for _, c := range clusters() {
			var s corev1.Secret
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster + "-ca"}, &s)
			if err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
				return s.Data["tls.crt"], s.Data["tls.key"], nil
			}
			errs = append(errs, err)
		}
		return nil, nil, fmt.Errorf("no cluster holds Secret %s/%s-ca: %w", namespace, cluster, errors.Join(errs...))
	}
}
