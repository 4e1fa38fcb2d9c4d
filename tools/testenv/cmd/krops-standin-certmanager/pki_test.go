package main

import (
	"testing"
	"time"
)

func TestIssueSignsWithTheIssuerAndMatchesOnlyWhatItAsked(t *testing.T) {
	root, err := issue(request{commonName: "lane CA", isCA: true, algorithm: "ECDSA"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(root.ca) != string(root.cert) {
		t.Fatal("a selfSigned certificate's ca.crt must be itself")
	}
	ca, err := parseSigner(root.cert, root.key)
	if err != nil {
		t.Fatal(err)
	}
	r := request{dnsNames: []string{"svc.ns.svc", "svc.ns.svc.cluster.local"}}
	leaf, err := issue(r, ca)
	if err != nil {
		t.Fatal(err)
	}
	if string(leaf.ca) != string(root.cert) {
		t.Fatal("ca.crt of a ca-issued certificate must be the issuer's certificate")
	}
	if !matches(leaf.cert, root.cert, r) {
		t.Fatal("the certificate just issued does not match its request")
	}
	if matches(leaf.cert, root.cert, request{dnsNames: []string{"svc.ns.svc"}}) {
		t.Fatal("a change of DNS names must reissue")
	}
	other, err := issue(request{isCA: true, algorithm: "ECDSA"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if matches(leaf.cert, other.cert, r) {
		t.Fatal("a certificate from another CA must be reissued")
	}
	short, err := issue(request{dnsNames: r.dnsNames, duration: 30 * time.Minute, algorithm: "ECDSA"}, ca)
	if err != nil {
		t.Fatal(err)
	}
	if matches(short.cert, root.cert, r) {
		t.Fatal("a certificate expiring within the hour must be reissued")
	}
	if _, err := issue(request{algorithm: "Ed25519"}, nil); err == nil {
		t.Fatal("an algorithm the stand-in does not sign must fail, not fall back")
	}
}

func TestParseKeepsOnlyTheArgumentsItReads(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "cert-manager")
	o, err := parse("webhook", []string{"--v=2", "--secure-port=10250", "--dynamic-serving-ca-secret-namespace=$(POD_NAMESPACE)",
		"--dynamic-serving-ca-secret-name=cert-manager-webhook-ca", "--dynamic-serving-dns-names=cert-manager-webhook",
		"--dynamic-serving-dns-names=cert-manager-webhook.cert-manager.svc", "--metrics-listen-address=0"})
	if err != nil {
		t.Fatal(err)
	}
	if o.securePort != 10250 || o.caSecretName != "cert-manager-webhook-ca" || len(o.dnsNames) != 2 {
		t.Fatalf("parsed %+v", o)
	}
	// Kubernetes expands $(POD_NAMESPACE) before the program sees it; the
	// stand-in does not, and must not invent a namespace.
	if o.caSecretNamespace != "$(POD_NAMESPACE)" {
		t.Fatalf("namespace %q", o.caSecretNamespace)
	}
}
