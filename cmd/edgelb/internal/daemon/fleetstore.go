package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/store"
)

// openStore opens the state store the config names: this gateway's bbolt
// file, or the etcd cluster a fleet shares (no fresh-store check there: the
// fleet's state lives on without this gateway, and an empty prefix is a new
// fleet).
func openStore(cfg *config.Config, log *slog.Logger) (store.Store, error) {
	if cfg.State.Type != config.StateEtcd {
		return openBolt(cfg, log)
	}
	et := cfg.State.Etcd
	tc, err := etcdTLS(et)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	st, err := store.OpenEtcd(store.EtcdOptions{Endpoints: et.Endpoints, TLS: tc, Prefix: et.Prefix, Gateway: host,
		Logger: log.With("component", "store")})
	if err != nil {
		return nil, err
	}
	log.Info("state in etcd, shared by the fleet", "endpoints", et.Endpoints, "prefix", et.Prefix)
	return st, nil
}

// etcdTLS builds the client's TLS from state.tls (nil: none configured
// and every endpoint plain http).
func etcdTLS(et *config.Etcd) (*tls.Config, error) {
	if et.CA == "" && et.Cert == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if et.CA != "" {
		pem, err := os.ReadFile(et.CA)
		if err != nil {
			return nil, fmt.Errorf("state.tls.ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("state.tls.ca %s: no PEM certificate in it", et.CA)
		}
	}
	if et.Cert != "" {
		c, err := tls.LoadX509KeyPair(et.Cert, et.Key)
		if err != nil {
			return nil, fmt.Errorf("state.tls.cert/key: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
