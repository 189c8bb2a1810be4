package daemon

import (
	"context"
	"log/slog"
	"os"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/store"
)

// openStore opens the state store the config names: this gateway's bbolt
// file, or the etcd cluster a fleet shares (no fresh-store check there: the
// fleet's state lives on without this gateway, and an empty prefix is a new
// fleet). It waits for etcd until ctx ends (SIGTERM during start-up).
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.Store, error) {
	if cfg.State.Type != config.StateEtcd {
		return openBolt(cfg, log)
	}
	et := cfg.State.Etcd
	tc, err := store.EtcdTLS("state.tls.", et.CA, et.Cert, et.Key)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenEtcd(ctx, store.EtcdOptions{Endpoints: et.Endpoints, TLS: tc, Prefix: et.Prefix, Gateway: fleetName(et),
		Logger: log.With("component", "store")})
	if err != nil {
		return nil, err
	}
	log.Info("state in etcd, shared by the fleet", "endpoints", et.Endpoints, "prefix", et.Prefix)
	return st, nil
}

// fleetName is this gateway's name in the fleet: state.gateway, or the
// host name.
func fleetName(et *config.Etcd) string {
	if et.Gateway != "" {
		return et.Gateway
	}
	host, _ := os.Hostname()
	return host
}
