// Package daemon wires edgelb's parts into the gateway daemon: config →
// host checks → store → engine (the one writer) → effects (dataplane, then
// announcers) → REST API. It holds no domain logic of its own.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/l2"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/effects"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/lb/preflight"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/webui"
)

// Options are the daemon's command-line inputs.
type Options struct {
	ConfigPath string
	Logger     *slog.Logger
	// NewLogger, when set, replaces Logger once the config is read, with
	// the config's log section (format and level).
	NewLogger func(config.Log) *slog.Logger
	// Dataplane and Announcers, when set, are used instead of the kernel's
	// ones the config names (its dataplane and announce sections are then
	// ignored): a root-free test runs config → engine → effects → proxy/fake
	// (inject.go). Run closes them as its own. The machine's interfaces
	// are not the fake's: only the config's own addresses count then.
	Dataplane  proxy.Dataplane
	Announcers []announce.Announcer
}

// Run runs the daemon until ctx ends (SIGTERM/SIGINT) and shuts down the
// way the config says: VIPs withdrawn and kernel objects removed, or both
// left serving for a restart.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	var up startup
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return err
	}
	if o.NewLogger != nil {
		log = o.NewLogger(cfg.Log)
	}
	up.mark("config")
	findings, err := preflight.HostFindings(cfg, hostcheck.System())
	if err != nil {
		return err
	}
	up.mark("checks")
	for _, f := range append(findings, preflight.APIFindings(cfg)...) {
		lvl := slog.LevelInfo
		if f.Severity >= hostcheck.Warn {
			lvl = slog.LevelWarn
		}
		log.Log(ctx, lvl, f.Message, "check", f.Code, "fix", f.Fix)
	}
	if b := preflight.Blocking(cfg, findings); len(b) > 0 {
		if b[0].Code == hostcheck.CodeRangeOverlap {
			return fmt.Errorf("refusing to start: %s (set dataplane.allowEphemeralOverlap to proceed despite a node-port overlap)", b[0].Message)
		}
		if b[0].Fix == "" {
			return fmt.Errorf("refusing to start: %s", b[0].Message)
		}
		return fmt.Errorf("refusing to start: %s (fix: %s)", b[0].Message, b[0].Fix)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), conntrackCollector{})
	notify, err := newNotifier()
	if err != nil {
		return err
	}
	nodeAddrs, err := nodeAddresses(cfg)
	if err != nil {
		return err
	}
	own, err := o.ownAddresses(cfg)
	if err != nil {
		return err
	}
	trail, err := openAudit(cfg, reg, log)
	if err != nil {
		return err
	}
	// The one writer: the standalone engine, or the Kubernetes controller.
	var w *writer
	if cfg.Kubernetes.Enabled {
		w, err = kubernetesWriter(cfg, nodeAddrs, own, reg, trail, log)
	} else {
		w, err = standaloneWriter(ctx, cfg, nodeAddrs, own, reg, trail, log)
	}
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM while waiting for the store (a fleet's etcd): a
			// stop asked for, not a failure.
			log.Info("stopped during start-up", "waiting for", err)
			return nil
		}
		return err
	}
	defer w.close()
	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	engDone := make(chan struct{})
	go func() { defer close(engDone); w.run(engCtx) }()
	if err := w.start(ctx); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped during start-up", "waiting for", err)
			return nil
		}
		return err
	}
	up.mark("writer")
	if w.setOwn != nil && o.Dataplane == nil {
		ownCtx, stopOwn := context.WithCancel(context.Background())
		ownDone := make(chan struct{})
		go func() {
			defer close(ownDone)
			watchOwnAddresses(ownCtx, cfg, w.setOwn, log.With("component", "ownaddrs"))
		}()
		defer func() { stopOwn(); <-ownDone }()
	}
	// The writer holds the pools and services now (the engine copies them;
	// the controller never reads them). cfg lives until shutdown for the
	// settings a reload compares, and with 10,000 services the parsed
	// copy alone is megabytes.
	cfg.Pools, cfg.Services = nil, nil

	dp, flows, closeFlows, err := o.dataplane(cfg, log)
	if err != nil {
		return err
	}
	defer closeFlows()
	syncer, err := newStateSync(cfg, log, reg)
	if err != nil {
		dp.Close()
		return err
	}
	isync, err := newIPVSSync(cfg, log, reg)
	if err != nil {
		dp.Close()
		return err
	}
	if isync != nil {
		// The kernel's daemons keep syncing while edgelb restarts; they
		// stop with the dataplane's cleanup (withdrawOnShutdown).
		defer func() {
			if err := isync.Close(cfg.Announce.WithdrawOnShutdown); err != nil {
				log.Warn("stopping the IPVS sync daemons", "err", err)
			}
		}()
	}
	var ho l2.Handover
	if syncer != nil {
		ho = syncer
		defer syncer.Close() // after the announcers' release steps
	}
	anns, err := o.announcers(cfg, log, reg, ho)
	if err != nil {
		dp.Close()
		return err
	}
	checker := health.New(health.Options{
		MaxInFlight: cfg.Health.MaxInFlight,
		Registerer:  reg,
		Logger:      log.With("component", "health"),
		OnChange: func(ev health.Event) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := w.setHealth(ctx, ev.Target.Service, ev.Target.Backend, ev.Healthy); err != nil {
				log.Warn("recording backend health", "err", err)
			}
		},
	})
	defer checker.Close()

	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	fxLog := log.With("component", "effects")
	fx := effects.New(effects.Options{Dataplane: dp, Announcers: effectsAnnouncers(anns), Logger: fxLog,
		Resync: cfg.Dataplane.ResyncInterval, Alive: notify.Alive, Registerer: reg,
		Refused:   effects.RefusedRelay(runCtx, w.setRefused, fxLog),
		OnDesired: func(d lb.Desired) { checker.Set(d.Health) }})

	var reporters []announce.Reporter
	for _, a := range anns {
		if r, ok := a.(announce.Reporter); ok {
			reporters = append(reporters, r)
		}
	}
	if syncer != nil {
		reporters = append(reporters, syncReporter{syncer})
	}
	if isync != nil {
		reporters = append(reporters, isync)
	}
	// Ready (/readyz) waits for the ready callback below, not only for the
	// first apply: the start-up metrics and the ready log line are there
	// once a client sees ready (a test read them in between and got none).
	var started readyGate
	api, err := webui.New(webui.Options{
		Manager: w.manager, Flows: flows, Reporters: reporters, Gatherer: reg, Registerer: reg,
		Health: healthAPI(checker), StoreHealth: w.storeHealth, StoreRevision: w.storeRevision,
		Fleet: w.fleet, FleetName: w.fleetName,
		Token: string(cfg.API.Token), Tokens: apiTokens(cfg.API), AnonymousReads: cfg.API.AnonymousReads,
		Audit: trail, StoreTrouble: w.storeTrouble,
		Listen: cfg.API.Listen.String(), TLS: tlsConfig(cfg.API.TLS),
		FlowWatchIdle: flowWatchIdle(cfg.API.LiveFlows),
		Ready:         started.ready(fx.Ready),
		Logger:        log.With("component", "api"),
	})
	if err != nil {
		dp.Close()
		return err
	}

	fxDone := make(chan struct{})
	go func() {
		defer close(fxDone)
		fx.Run(runCtx, w.desired, func() {
			notify.Ready("serving")
			up.mark("apply")
			log.Info("dataplane converged; ready", append([]any{"dataplane", dp.Name()}, up.fields()...)...)
			up.register(reg)
			started.Store(true)
		})
	}()
	if err := api.Start(runCtx); err != nil {
		stopRun()
		<-fxDone
		dp.Close()
		return err
	}
	log.Info("edgelb running", "api", cfg.API.Listen.String(), "dataplane", dp.Name())

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-hup:
			notify.Reloading()
			if err := reload(ctx, o.ConfigPath, cfg, w, log); err != nil {
				log.Error("reload refused; the running config stays", "err", err)
			} else {
				log.Info("config reloaded", "path", o.ConfigPath)
			}
			notify.Status("serving")
			notify.Ready("serving")
		}
	}

	// Shutdown.
	notify.Stopping()
	log.Info("shutting down", "withdraw", cfg.Announce.WithdrawOnShutdown)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = api.Shutdown(sctx)
	stopRun()
	<-fxDone
	var errs []error
	// Stop the writer and wait for it: in cluster mode that is when the
	// controller releases its Lease, so another gateway leads at once
	// instead of after the Lease expires (issue 13: 18–21 s, because the
	// process exited before the release was sent).
	stopEngine()
	select {
	case <-engDone:
	case <-sctx.Done():
		errs = append(errs, errors.New("the writer did not stop within 10 s (its Lease, in cluster mode, expires on its own)"))
	}
	for _, a := range anns {
		if err := a.Close(cfg.Announce.WithdrawOnShutdown); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Name(), err))
		}
	}
	if cfg.Announce.WithdrawOnShutdown {
		if err := dp.Cleanup(sctx); err != nil {
			errs = append(errs, fmt.Errorf("dataplane cleanup: %w", err))
		}
	}
	errs = append(errs, dp.Close())
	return errors.Join(errs...)
}

// reload parses the file again and hands pools and services to the engine.
// Settings that need a restart (dataplane, announce, API) are reported.
func reload(ctx context.Context, path string, old *config.Config, w *writer, log *slog.Logger) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	for _, w := range restartNeeded(old, cfg) {
		log.Warn("changed setting needs a restart to take effect", "setting", w)
	}
	if w.syncConfig == nil {
		return nil
	}
	return w.syncConfig(withActor(ctx, actorReload), cfg.Pools, cfg.Services)
}
