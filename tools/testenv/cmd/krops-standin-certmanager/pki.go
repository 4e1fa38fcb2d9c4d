package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// request is what a Certificate asks for.
type request struct {
	commonName string
	dnsNames   []string
	isCA       bool
	duration   time.Duration
	// algorithm is spec.privateKey.algorithm: RSA (cert-manager's default)
	// or ECDSA.
	algorithm string
}

// signer is a CA: its certificate and key.
type signer struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// issued is a certificate with its key and the CA to trust it by, PEM.
type issued struct {
	cert, key, ca []byte
}

// issue signs r with by, or with its own key when by is nil (selfSigned).
func issue(r request, by *signer) (issued, error) {
	key, keyPEM, err := newKey(r.algorithm)
	if err != nil {
		return issued{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return issued{}, err
	}
	if r.duration <= 0 {
		r.duration = 90 * 24 * time.Hour
	}
	cn := r.commonName
	if cn == "" && len(r.dnsNames) > 0 {
		cn = r.dnsNames[0]
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: r.dnsNames,
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(r.duration), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	if r.isCA {
		tmpl.IsCA = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	parent, parentKey := tmpl, key
	if by != nil {
		parent, parentKey = by.cert, by.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return issued{}, fmt.Errorf("sign %q: %w", cn, err)
	}
	out := issued{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM}
	if by != nil {
		out.ca = by.pem
	} else {
		out.ca = out.cert
	}
	return out, nil
}

func newKey(algorithm string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch algorithm {
	case "", "RSA":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ECDSA":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, nil, fmt.Errorf("private key algorithm %q: the stand-in signs RSA and ECDSA only", algorithm)
	}
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseSigner reads a CA from a kubernetes.io/tls Secret's data.
func parseSigner(certPEM, keyPEM []byte) (*signer, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("tls.crt or tls.key holds no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	var key any
	switch kb.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	return &signer{cert: cert, key: s, pem: certPEM}, nil
}

// matches says whether certPEM still answers r as signed by caPEM.
func matches(certPEM, caPEM []byte, r request) bool {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil || time.Until(cert.NotAfter) < time.Hour || cert.IsCA != r.isCA {
		return false
	}
	if len(cert.DNSNames) != len(r.dnsNames) {
		return false
	}
	for i, n := range r.dnsNames {
		if cert.DNSNames[i] != n {
			return false
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return false
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}
