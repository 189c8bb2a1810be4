package store

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// EtcdTLS builds the etcd client's TLS from files: ca verifies the
// members, cert and key (together) authenticate the client. All empty: nil
// (plain http, or https with the system's roots). field names the setting
// in errors ("state.tls" in the config file, "--" for flags).
func EtcdTLS(field, ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%sca: %w", field, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%sca %s: no PEM certificate in it", field, ca)
		}
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%scert, %skey: %w", field, field, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
