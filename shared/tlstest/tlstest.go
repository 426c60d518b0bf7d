// Package tlstest makes a throwaway certificate authority for tests that
// prove a connection really is TLS: the server gets a certificate the test
// CA signed, the client trusts only that CA, so a client that skips TLS
// (or verification) fails against it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test authority and one server certificate it signed, valid for
// localhost, 127.0.0.1 and ::1. The PEM files live in the test's temporary
// directory, written 0600 (servers such as PostgreSQL refuse a key that
// others can read).
type CA struct {
	CertFile string // the CA's certificate (PEM), for clients
	Pool     *x509.CertPool
	// ServerCert and ServerKey are the server's certificate and key (PEM files).
	ServerCert, ServerKey string
	// Server is the same pair, for a Go server.
	Server tls.Certificate
}

// New makes a CA and a server certificate in tb.TempDir().
func New(tb testing.TB) *CA {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "onsale test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{CertFile: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey: filepath.Join(dir, "server.key"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(caCert)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for path, b := range map[string][]byte{
		ca.CertFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		ca.ServerCert: certPEM,
		ca.ServerKey:  keyPEM,
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	if ca.Server, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		tb.Fatal(err)
	}
	return ca
}

// ClientConfig trusts only the test CA.
func (ca *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
}
