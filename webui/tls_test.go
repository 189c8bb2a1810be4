package webui

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"
)

type testCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	tls  tls.Certificate
}

func newCert(t *testing.T, cn string, parent *testCert, server bool) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.cert, parent.key
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCert{cert: c, key: key, tls: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// TestStartMTLS: with a TLS config requiring client certificates, a client
// with one signed by the CA is served and one without is refused at the
// handshake. Start/Shutdown work end to end.
func TestStartMTLS(t *testing.T) {
	ca := newCert(t, "edgelb test CA", nil, false)
	srvCert := newCert(t, "127.0.0.1", ca, true)
	cliCert := newCert(t, "operator", ca, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	m := newFakeManager()
	m.seed(t)
	s, err := New(Options{Manager: m, Listen: "127.0.0.1:0", TLS: &tls.Config{
		Certificates: []tls.Certificate{srvCert.tls}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	url := "https://" + s.Addr().String() + "/api/v1/pools"
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}
	resp, err := client(cliCert.tls).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) == 0 {
		t.Fatalf("with client cert: %d %s", resp.StatusCode, body)
	}
	if resp, err := client().Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("without a client certificate: %d, want a refused handshake", resp.StatusCode)
	} else {
		t.Logf("without a client certificate: %v", err)
	}
}
