package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEtcdTransient: what another attempt may change (the member has no
// leader, the leader changed, no connection) against what it cannot.
func TestEtcdTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrGRPCNoLeader, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTimeout, true},
		{fmt.Errorf("x: %w", rpctypes.ErrNoLeader), true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{rpctypes.ErrTooManyOps, false},
		{rpctypes.ErrRequestTooLarge, false},
		{status.Error(codes.PermissionDenied, "no"), false},
		{context.Canceled, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestOpenEtcdStopsWithItsContext: SIGTERM while a gateway waits for its
// fleet's etcd at start (issue 35: it waited out the 60 s start timeout).
func TestOpenEtcdStopsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every connection is refused
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err = OpenEtcd(ctx, EtcdOptions{Endpoints: []string{"http://" + addr}, Timeout: 200 * time.Millisecond, StartTimeout: time.Hour})
	took := time.Since(t0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenEtcd after its context ended: %v, want context.Canceled", err)
	}
	// Bounded by one attempt (Timeout) after the cancel, far below the
	// hour: even on a loaded machine a minute is a failure.
	if took > time.Minute {
		t.Fatalf("OpenEtcd returned %s after its context ended", took)
	}
	t.Logf("MEASURED open-etcd-cancel returned_after_ms=%d (cancel at 300)", took.Milliseconds())
}

// TestOpenEtcdNamesTLSRefusal: a member whose certificate the gateway
// refuses, and one that refuses the gateway's (no client certificate):
// the error names the endpoint and the TLS failure, not "context deadline
// exceeded" (issue 35).
func TestOpenEtcdNamesTLSRefusal(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	for _, c := range []struct {
		name       string
		clientRoot *x509.Certificate
		clientAuth tls.ClientAuthType
		want       string
	}{
		{"unknown authority", other.cert, tls.NoClientCert, "certificate signed by unknown authority"},
		{"client certificate required", ca.cert, tls.RequireAndVerifyClientCert, "certificate required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := ca.issue(t)
			roots := x509.NewCertPool()
			roots.AddCert(ca.cert)
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srv},
				ClientAuth: c.clientAuth, ClientCAs: roots, MinVersion: tls.VersionTLS13})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						_ = conn.(*tls.Conn).Handshake()
						time.Sleep(time.Second)
						conn.Close()
					}()
				}
			}()
			pool := x509.NewCertPool()
			pool.AddCert(c.clientRoot)
			ep := "https://" + ln.Addr().String()
			_, err = OpenEtcd(context.Background(), EtcdOptions{Endpoints: []string{ep}, TLS: &tls.Config{RootCAs: pool},
				Timeout: 300 * time.Millisecond, StartTimeout: time.Second})
			var te *TLSError
			if !errors.As(err, &te) || !errors.Is(err, ErrUnavailable) || te.Endpoint != ep ||
				!strings.Contains(err.Error(), "etcd at "+ep+": TLS: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenEtcd: %v\nwant ErrUnavailable naming %s, TLS and %q", err, ep, c.want)
			}
			t.Logf("%v", err)
		})
	}
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// issue makes a server certificate for 127.0.0.1 signed by the CA.
func (ca *testCA) issue(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
