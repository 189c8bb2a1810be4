package daemon

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/ipvs/syncd"
)

// ipvsSyncInterval is how often the sync daemons are read back and repaired
// (a daemon stopped by hand, or a start that failed because the interface
// was not up yet).
const ipvsSyncInterval = 30 * time.Second

// ipvsSync keeps the kernel's IPVS sync daemons running as stateSync.ipvs
// asks: a master (this gateway's connections go out) and a backup (the other
// gateways' come in), both at once on every gateway, so whichever gateway a
// VIP moves to already has the connection entries. The daemons are kernel
// threads: they keep running while edgelb restarts.
type ipvsSync struct {
	s     syncd.Syncer
	close func() error
	want  syncd.Desired
	log   *slog.Logger

	mu      sync.Mutex
	state   syncd.State
	lastErr error
	errors  uint64

	stop chan struct{}
	done chan struct{}
}

// newIPVSSync opens generic netlink and starts the daemons when
// stateSync.ipvs is configured (nil, nil otherwise).
func newIPVSSync(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*ipvsSync, error) {
	c := cfg.StateSync.IPVS
	if c == nil {
		return nil, nil
	}
	k, err := syncd.Open("")
	if err != nil {
		return nil, fmt.Errorf("stateSync.ipvs: %w", err)
	}
	x := startIPVSSync(k, k.Close, ipvsDesired(c), log.With("component", "statesync", "kind", "ipvs"), ipvsSyncInterval)
	if reg != nil {
		reg.MustRegister(&ipvsSyncCollector{x: x})
	}
	return x, nil
}

// ipvsDesired: master and backup with the same parameters.
func ipvsDesired(c *config.IPVSSync) syncd.Desired {
	p := syncd.Params{Interface: c.Interface, SyncID: c.SyncID, Group: c.MulticastGroup, Port: c.Port, TTL: c.TTL}
	m, b := p, p
	return syncd.Desired{Master: &m, Backup: &b}
}

// startIPVSSync converges once now (a failure is logged and retried on the
// timer: the sync interface may come up after edgelb) and then every
// interval.
func startIPVSSync(k syncd.Kernel, closer func() error, want syncd.Desired, log *slog.Logger, interval time.Duration) *ipvsSync {
	x := &ipvsSync{s: syncd.Syncer{K: k}, close: closer, want: want, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
	x.converge()
	go func() {
		defer close(x.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-x.stop:
				return
			case <-t.C:
				x.converge()
			}
		}
	}()
	return x
}

func (x *ipvsSync) converge() {
	err := x.s.Set(x.want)
	st, gerr := x.s.Get()
	x.mu.Lock()
	defer x.mu.Unlock()
	if err == nil {
		err = gerr
	}
	if gerr == nil {
		x.state = st
	}
	if err != nil {
		x.errors++
		if x.lastErr == nil || x.lastErr.Error() != err.Error() {
			x.log.Warn("IPVS sync daemon not as configured; retrying", "err", err, "every", ipvsSyncInterval)
		}
	} else if x.lastErr != nil {
		x.log.Info("IPVS sync daemons running", "master", st.Master != nil, "backup", st.Backup != nil)
	}
	x.lastErr = err
}

// Close stops the timer; with stopDaemons (announce.withdrawOnShutdown, as
// the dataplane's cleanup) it also stops the kernel's daemons.
func (x *ipvsSync) Close(stopDaemons bool) error {
	close(x.stop)
	<-x.done
	var err error
	if stopDaemons {
		err = x.s.Set(syncd.Desired{})
	}
	if cerr := x.close(); err == nil {
		err = cerr
	}
	return err
}

// Status shows the daemons beside the announcers (REST
// /api/v1/status/announcers and the page): one row per role.
func (x *ipvsSync) Status() announce.Status {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := announce.Status{Kind: "statesync"}
	for _, r := range []struct {
		name      string
		want, got *syncd.Params
	}{{"ipvs master", x.want.Master, x.state.Master}, {"ipvs backup", x.want.Backup, x.state.Backup}} {
		ps := announce.PeerState{Name: r.name, State: "stopped"}
		p := r.want
		if r.got != nil {
			ps.State, p = "running", r.got
		}
		if p != nil {
			ps.Address = p.Interface
			ps.Detail = fmt.Sprintf("sync id %d", p.SyncID)
			if p.Group.IsValid() {
				ps.Detail += fmt.Sprintf(", group %s port %d ttl %d", p.Group, p.Port, p.TTL)
			}
		}
		if x.lastErr != nil {
			ps.Detail += "; last error: " + x.lastErr.Error()
		}
		out.Peers = append(out.Peers, ps)
	}
	return out
}

// ipvsSyncCollector: edgelb_statesync_ipvs_daemon{role} is 1 while that
// daemon runs (as last read back), 0 otherwise.
type ipvsSyncCollector struct{ x *ipvsSync }

var (
	ipvsSyncDaemon = prometheus.NewDesc("edgelb_statesync_ipvs_daemon",
		"1 while the kernel's IPVS sync daemon of this role runs (read back every 30 s).", []string{"role"}, nil)
	ipvsSyncErrors = prometheus.NewDesc("edgelb_statesync_ipvs_errors_total",
		"Failed attempts to bring the IPVS sync daemons to their configured state.", nil, nil)
)

func (c *ipvsSyncCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ipvsSyncDaemon
	ch <- ipvsSyncErrors
}

func (c *ipvsSyncCollector) Collect(ch chan<- prometheus.Metric) {
	c.x.mu.Lock()
	st, n := c.x.state, c.x.errors
	c.x.mu.Unlock()
	b := func(p *syncd.Params) float64 {
		if p != nil {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(ipvsSyncDaemon, prometheus.GaugeValue, b(st.Master), "master")
	ch <- prometheus.MustNewConstMetric(ipvsSyncDaemon, prometheus.GaugeValue, b(st.Backup), "backup")
	ch <- prometheus.MustNewConstMetric(ipvsSyncErrors, prometheus.CounterValue, float64(n))
}
