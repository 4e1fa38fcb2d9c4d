package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var (
	issuersGVR        = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	clusterIssuersGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "clusterissuers"}
	certificatesGVR   = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	// certificateRequestsGVR: startupapicheck's probe.
	certificateRequestsGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"}
)

// issuerState is what an issuer can do this pass.
type issuerState struct {
	selfSigned bool
	ca         *signer
	// notReady is why it cannot sign, empty when it can.
	notReady string
}

// reconcileCertificates is one pass of the controller: issuers first, then
// the certificates they sign.
func (c clients) reconcileCertificates(ctx context.Context, o options) error {
	issuers := map[string]issuerState{}
	for _, kind := range []struct {
		gvr     schema.GroupVersionResource
		kind    string
		cluster bool
	}{{issuersGVR, "Issuer", false}, {clusterIssuersGVR, "ClusterIssuer", true}} {
		list, err := c.dyn.Resource(kind.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list %s: %w", kind.gvr.Resource, err)
		}
		for i := range list.Items {
			is := &list.Items[i]
			secretNS := is.GetNamespace()
			if kind.cluster {
				secretNS = o.clusterResourceNamespace
			}
			st := c.issuerState(ctx, is, secretNS)
			issuers[issuerKey(kind.kind, is.GetNamespace(), is.GetName())] = st
			var ri dynamic.ResourceInterface = c.dyn.Resource(kind.gvr)
			if !kind.cluster {
				ri = c.dyn.Resource(kind.gvr).Namespace(is.GetNamespace())
			}
			if st.notReady == "" {
				c.setReady(ctx, ri, is, "True", "KeyPairVerified", "Signing CA verified (krops stand-in)")
			} else {
				c.setReady(ctx, ri, is, "False", "ErrGetKeyPair", st.notReady)
			}
		}
	}
	certs, err := c.dyn.Resource(certificatesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list certificates: %w", err)
	}
	for i := range certs.Items {
		if err := c.reconcileCertificate(ctx, &certs.Items[i], issuers); err != nil {
			c.logger.Printf("certificate %s/%s: %v", certs.Items[i].GetNamespace(), certs.Items[i].GetName(), err)
		}
	}
	return nil
}

func issuerKey(kind, ns, name string) string {
	if kind == "ClusterIssuer" {
		ns = ""
	}
	return kind + "/" + ns + "/" + name
}

func (c clients) issuerState(ctx context.Context, is *unstructured.Unstructured, secretNS string) issuerState {
	if _, ok, _ := unstructured.NestedMap(is.Object, "spec", "selfSigned"); ok {
		return issuerState{selfSigned: true}
	}
	name, ok, _ := unstructured.NestedString(is.Object, "spec", "ca", "secretName")
	if !ok {
		return issuerState{notReady: "the krops stand-in for cert-manager signs with selfSigned and ca issuers only"}
	}
	s, err := c.core.CoreV1().Secrets(secretNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return issuerState{notReady: fmt.Sprintf("CA secret %s/%s: %v", secretNS, name, err)}
	}
	sg, err := parseSigner(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return issuerState{notReady: fmt.Sprintf("CA secret %s/%s: %v", secretNS, name, err)}
	}
	return issuerState{ca: sg}
}

func (c clients) reconcileCertificate(ctx context.Context, cert *unstructured.Unstructured, issuers map[string]issuerState) error {
	ns := cert.GetNamespace()
	ri := c.dyn.Resource(certificatesGVR).Namespace(ns)
	spec, _, _ := unstructured.NestedMap(cert.Object, "spec")
	secretName, _, _ := unstructured.NestedString(spec, "secretName")
	issuerName, _, _ := unstructured.NestedString(spec, "issuerRef", "name")
	issuerKind, _, _ := unstructured.NestedString(spec, "issuerRef", "kind")
	if issuerKind == "" {
		issuerKind = "Issuer"
	}
	st, ok := issuers[issuerKey(issuerKind, ns, issuerName)]
	switch {
	case !ok:
		c.setReady(ctx, ri, cert, "False", "IssuerNotFound", fmt.Sprintf("%s %q not found", issuerKind, issuerName))
		return nil
	case st.notReady != "":
		c.setReady(ctx, ri, cert, "False", "IssuerNotReady", fmt.Sprintf("%s %q: %s", issuerKind, issuerName, st.notReady))
		return nil
	}
	r := request{}
	r.commonName, _, _ = unstructured.NestedString(spec, "commonName")
	r.dnsNames, _, _ = unstructured.NestedStringSlice(spec, "dnsNames")
	r.isCA, _, _ = unstructured.NestedBool(spec, "isCA")
	r.algorithm, _, _ = unstructured.NestedString(spec, "privateKey", "algorithm")
	if d, ok, _ := unstructured.NestedString(spec, "duration"); ok {
		if v, err := time.ParseDuration(d); err == nil {
			r.duration = v
		}
	}
	secrets := c.core.CoreV1().Secrets(ns)
	existing, err := secrets.Get(ctx, secretName, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return err
	}
	if !missing {
		caPEM := existing.Data[corev1.TLSCertKey]
		if st.ca != nil {
			caPEM = st.ca.pem
		}
		if matches(existing.Data[corev1.TLSCertKey], caPEM, r) &&
			existing.Annotations["cert-manager.io/issuer-name"] == issuerName && existing.Annotations["cert-manager.io/issuer-kind"] == issuerKind {
			c.setReady(ctx, ri, cert, "True", "Ready", "Certificate is up to date and has not expired")
			return nil
		}
	}
	out, err := issue(r, st.ca)
	if err != nil {
		c.setReady(ctx, ri, cert, "False", "Failed", err.Error())
		return nil
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns, Labels: map[string]string{"controller.cert-manager.io/fao": "true"},
			Annotations: map[string]string{"cert-manager.io/certificate-name": cert.GetName(), "cert-manager.io/issuer-name": issuerName,
				"cert-manager.io/issuer-kind": issuerKind, "cert-manager.io/issuer-group": "cert-manager.io",
				"cert-manager.io/common-name": r.commonName, "cert-manager.io/alt-names": strings.Join(r.dnsNames, ",")}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: out.cert, corev1.TLSPrivateKeyKey: out.key, "ca.crt": out.ca},
	}
	if tmpl, ok, _ := unstructured.NestedMap(spec, "secretTemplate"); ok {
		for k, v := range stringMap(tmpl["labels"]) {
			want.Labels[k] = v
		}
		for k, v := range stringMap(tmpl["annotations"]) {
			want.Annotations[k] = v
		}
	}
	if missing {
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
	} else {
		existing.Data, existing.Type = want.Data, want.Type
		existing.Labels = merge(existing.Labels, want.Labels)
		existing.Annotations = merge(existing.Annotations, want.Annotations)
		_, err = secrets.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", ns, secretName, err)
	}
	c.logger.Printf("issued %s/%s into secret %s (%s %s)", ns, cert.GetName(), secretName, issuerKind, issuerName)
	c.setReady(ctx, ri, cert, "True", "Ready", "Certificate is up to date and has not expired")
	return nil
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := map[string]string{}
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}

func merge(a, b map[string]string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range b {
		a[k] = v
	}
	return a
}

// setReady writes the Ready condition when it changes, as the status
// subresource.
func (c clients) setReady(ctx context.Context, ri dynamic.ResourceInterface, o *unstructured.Unstructured, status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == "Ready" && m["status"] == status && m["message"] == message && m["observedGeneration"] == o.GetGeneration() {
			return
		}
	}
	cond := map[string]any{"type": "Ready", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": o.GetGeneration()}
	kept := []any{cond}
	for _, x := range conds {
		if m, _ := x.(map[string]any); m["type"] != "Ready" {
			kept = append(kept, x)
		}
	}
	o = o.DeepCopy()
	if err := unstructured.SetNestedSlice(o.Object, kept, "status", "conditions"); err != nil {
		c.logger.Printf("%s %s: %v", o.GetKind(), o.GetName(), err)
		return
	}
	if _, err := ri.UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		c.logger.Printf("%s %s/%s status: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
}
