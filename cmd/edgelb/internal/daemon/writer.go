package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/health/node"
	"github.com/edgelb/edgelb/lb/k8s"
	"github.com/edgelb/edgelb/lb/store"
)

// writer is the one writer of a mode, seen through what the daemon needs:
// the REST API's Manager, the desired-state stream, health input and config
// reload. Standalone: lb.Engine over bbolt. Kubernetes: the controller.
type writer struct {
	manager    lb.Manager
	desired    <-chan lb.Desired
	run        func(ctx context.Context)
	start      func(ctx context.Context) error
	setHealth  func(ctx context.Context, service string, backend netip.AddrPort, healthy bool) error
	syncConfig func(ctx context.Context, pools []lb.Pool, services []lb.ServiceSpec) error
	// setRefused shows the services the dataplane refused one by one in
	// their status (nil: the mode has no place for it yet).
	setRefused func(ctx context.Context, refused map[string]string) error
	// setOwn hands over the gateway's own addresses when its interfaces'
	// change (both modes: the engine, or the controller and its OwnFilter).
	setOwn func(ctx context.Context, own *lb.OwnAddrs) error
	close  func()
	// storeHealth and storeRevision: a fleet's shared store (nil otherwise).
	storeHealth   func() error
	storeRevision func() int64
	// storeTrouble: the last store commit's failure (nil: none or not the
	// engine's mode).
	storeTrouble func() error
	fleet        func(context.Context) ([]store.GatewayStatus, error)
	fleetName    string
}

// openBolt opens this gateway's own state file (state.type bbolt).
func openBolt(cfg *config.Config, log *slog.Logger) (store.Store, error) {
	if err := os.MkdirAll(cfg.State.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(cfg.State.Dir, "edgelb.db")
	if err := checkFreshStore(path, log); err != nil {
		return nil, err
	}
	st, err := store.OpenBolt(path, store.BoltOptions{})
	if err != nil {
		return nil, err
	}
	if st.Migrated > 0 {
		log.Warn("state file written before records had checksums: framed every record with one", "path", path, "records", st.Migrated)
	}
	return st, nil
}

func standaloneWriter(ctx context.Context, cfg *config.Config, nodeAddrs []netip.Addr, own *lb.OwnAddrs, reg prometheus.Registerer, trail audit.Recorder, log *slog.Logger) (*writer, error) {
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	an := cfg.Announcers()
	eng, err := engine.NewEngine(st, engine.Options{
		Announcers:      &an,
		NodeAddrs:       nodeAddrs,
		OwnAddrs:        own,
		AllocationOrder: cfg.AllocationOrder,
		NodePortRange:   lb.PortRange{First: cfg.Dataplane.NodePortRange.First, Last: cfg.Dataplane.NodePortRange.Last},
		Registry:        reg,
		AllDown:         allDownPolicy(cfg),
		Check:           engineCheck(cfg),
		ConfigFile:      cfg.File,
		Fleet:           cfg.State.Type == config.StateEtcd,
		Audit:           trail,
		Logger:          log.With("component", "engine"),
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	w := &writer{
		manager: eng,
		run: func(ctx context.Context) {
			if err := eng.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("engine stopped", "err", err)
			}
		},
		setHealth:    eng.SetBackendHealth,
		syncConfig:   eng.SyncConfig,
		setRefused:   eng.SetRefused,
		setOwn:       eng.SetOwnAddrs,
		storeTrouble: eng.StoreTrouble,
		close:        func() { st.Close() },
	}
	if sh, ok := st.(store.Shared); ok {
		w.storeHealth, w.storeRevision, w.fleet = sh.Health, sh.Revision, sh.Fleet
		w.fleetName = fleetName(cfg.State.Etcd)
	}
	w.start = func(ctx context.Context) error {
		if err := eng.SyncConfig(withActor(ctx, actorStartup), cfg.Pools, cfg.Services); err != nil {
			return fmt.Errorf("apply config: %w", err)
		}
		// Subscribe only now: its first value is the state with the config
		// applied, so the first converged Apply (READY=1, /readyz) means
		// the configured services are programmed, not the empty state the
		// engine restored before the config was read.
		w.desired = eng.Subscribe()
		return nil
	}
	return w, nil
}

func kubernetesWriter(cfg *config.Config, nodeAddrs []netip.Addr, own *lb.OwnAddrs, reg prometheus.Registerer, trail audit.Recorder, log *slog.Logger) (*writer, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubernetes.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubernetes.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	an := cfg.Announcers()
	c, err := k8s.NewForConfig(rc, k8s.Options{
		Class:           cfg.Kubernetes.LoadBalancerClass,
		AllocationOrder: cfg.AllocationOrder,
		HandleClassless: cfg.Kubernetes.HandleClassless,
		NodeName:        cfg.Kubernetes.NodeName,
		NodeAddrs:       nodeAddrs,
		OwnAddrs:        own,
		Announcers:      &an,
		BackendMode:     k8s.BackendMode(cfg.Kubernetes.BackendMode),
		Scheduler:       cfg.Kubernetes.Scheduler,
		Method:          cfg.Kubernetes.Method,

		NodePortsOnLoadBalancers: cfg.Kubernetes.NodePortsOnLoadBalancers,
		LeaseNamespace:           cfg.Kubernetes.LeaseNamespace,
		LeaseName:                cfg.Kubernetes.LeaseName,
		Audit:                    trail,
		Registerer:               reg,
		Logger:                   log.With("component", "kubernetes"),
	})
	if err != nil {
		return nil, err
	}
	// The controller publishes lb.Desired, the engine's type: the effects
	// loop reads the stream directly (no conversion hand-off), through the
	// per-gateway stages: this gateway's own addresses (every Service whose
	// VIP or backend is one is left out and reported on it), then, with
	// node ports, the node checks.
	of := k8s.NewOwnFilter(own, c.SetOwnRefused)
	fromController := c.Subscribe()
	ownOut := make(chan lb.Desired, 1)
	w := &writer{
		manager: c.Manager(),
		desired: ownOut,
		run: func(ctx context.Context) {
			go of.Run(ctx, fromController, ownOut)
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("kubernetes controller stopped", "err", err)
			}
		},
		start:      c.WaitSynced,
		setRefused: c.SetRefused,
		setOwn: func(ctx context.Context, own *lb.OwnAddrs) error {
			if err := c.SetOwnAddrs(ctx, own); err != nil {
				return err
			}
			return of.SetOwnAddrs(ctx, own)
		},
		setHealth: func(context.Context, string, netip.AddrPort, bool) error {
			return nil // endpoints mode: Kubernetes readiness decides which pods get traffic
		},
		close: func() {},
	}
	if hc := cfg.Kubernetes.NodeHealthCheck; hc != nil && cfg.Kubernetes.BackendMode == config.BackendNodePort {
		// Node ports: the gateway checks the nodes itself, between the
		// own-address stage and the effects loop.
		nh := node.NewFilter(node.Options{Check: *hc, Withdraw: cfg.Health.AllDown == config.AllDownWithdraw})
		w.setHealth = nh.SetHealth
		out := make(chan lb.Desired, 1)
		w.desired = out
		w.run = func(ctx context.Context) {
			go of.Run(ctx, fromController, ownOut)
			go nh.Run(ctx, ownOut, out)
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("kubernetes controller stopped", "err", err)
			}
		}
	}
	return w, nil
}
