package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serveWebhook serves the chart's webhooks: a CA kept in the Secret the
// chart names (created once, then reused by every replica and restart) signs
// the serving certificate for the chart's DNS names, and cainjector puts
// that CA into the webhook configurations.
func (c clients) serveWebhook(ctx context.Context, o options) error {
	if o.caSecretName == "" || o.caSecretNamespace == "" || len(o.dnsNames) == 0 {
		return errors.New("--dynamic-serving-ca-secret-namespace, --dynamic-serving-ca-secret-name and --dynamic-serving-dns-names are required (the chart passes them)")
	}
	ca, err := c.servingCA(ctx, o)
	if err != nil {
		return err
	}
	serving, err := issue(request{dnsNames: o.dnsNames, duration: 365 * 24 * time.Hour}, ca)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(serving.cert, serving.key)
	if err != nil {
		return err
	}
	go health(ctx, c.logger, ":6080")
	mux := http.NewServeMux()
	mux.HandleFunc("/", c.admit)
	s := &http.Server{Addr: fmt.Sprintf(":%d", o.securePort), Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()
	c.logger.Printf("serving on %s for %v", s.Addr, o.dnsNames)
	if err := s.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servingCA reads the CA Secret, creating it on first start.
func (c clients) servingCA(ctx context.Context, o options) (*signer, error) {
	secrets := c.core.CoreV1().Secrets(o.caSecretNamespace)
	for range 5 {
		s, err := secrets.Get(ctx, o.caSecretName, metav1.GetOptions{})
		if err == nil {
			return parseSigner(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("CA secret %s/%s: %w", o.caSecretNamespace, o.caSecretName, err)
		}
		ca, err := issue(request{commonName: "cert-manager-webhook-ca", isCA: true, duration: 365 * 24 * time.Hour, algorithm: "ECDSA"}, nil)
		if err != nil {
			return nil, err
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: o.caSecretName, Namespace: o.caSecretNamespace,
				Annotations: map[string]string{"cert-manager.io/allow-direct-injection": "true"}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: ca.cert, corev1.TLSPrivateKeyKey: ca.key, "ca.crt": ca.ca},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create CA secret %s/%s: %w", o.caSecretNamespace, o.caSecretName, err)
		}
	}
	return nil, fmt.Errorf("CA secret %s/%s: created but not readable", o.caSecretNamespace, o.caSecretName)
}

// admit allows every AdmissionReview: the stand-in runs the webhook's
// transport (TLS from the injected CA, the API server calling it) but not
// cert-manager's validation rules.
func (c clients) admit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review struct {
		APIVersion string `json:"apiVersion"`
		Request    *struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": "AdmissionReview",
		"response": map[string]any{"uid": review.Request.UID, "allowed": true}})
}

// checkAPI creates a CertificateRequest with dryRun until the API server
// accepts it, which needs the CRDs served and the webhook reachable with
// the injected CA, for up to --wait. A CertificateRequest, as the real check
// does: the chart's startupapicheck Role may create those and nothing else.
func (c clients) checkAPI(ctx context.Context, o options) error {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	key, _, err := newKey("ECDSA")
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "cmapichecker"}}, key)
	if err != nil {
		return fmt.Errorf("the probe's CSR: %w", err)
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "CertificateRequest",
		"metadata": map[string]any{"generateName": "cmapichecker-", "namespace": ns},
		"spec": map[string]any{"request": base64.StdEncoding.EncodeToString(csr),
			"issuerRef": map[string]any{"name": "cmapichecker"}}}}
	deadline := time.Now().Add(o.wait)
	for {
		_, err := c.dyn.Resource(certificateRequestsGVR).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			c.logger.Print("The cert-manager API is ready")
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the cert-manager API is not ready after %s: %w", o.wait, err)
		}
		c.logger.Printf("not ready yet: %v", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}
