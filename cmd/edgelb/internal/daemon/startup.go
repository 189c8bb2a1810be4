package daemon

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/edgelb/edgelb/lb/effects"

	"github.com/prometheus/client_golang/prometheus"
)

// startup times the phases from process start to ready — config load, host
// checks, the writer taking the config, the first apply — so the ready log
// line and /metrics say where a slow start went (issue 18: "start to ready
// 2.0–4.7 s at 10,000 services" said nothing about why).
type startup struct {
	last   time.Time
	phases []phase
}

type phase struct {
	name string
	took time.Duration
}

// processStart is when this process began, as near as Go can tell: package
// initialisation, before main.
var processStart = time.Now()

func (s *startup) mark(name string) {
	now := time.Now()
	if s.last.IsZero() {
		s.last = processStart
	}
	s.phases = append(s.phases, phase{name, now.Sub(s.last)})
	s.last = now
}

// fields are slog key/value pairs: each phase and the total.
func (s *startup) fields() []any {
	var out []any
	var total time.Duration
	for _, p := range s.phases {
		out = append(out, p.name, p.took.Round(time.Millisecond).String())
		total += p.took
	}
	return append(out, "startToReady", total.Round(time.Millisecond).String())
}

// register exports the phases as edgelb_startup_seconds{phase} (and
// phase="total"), once the first apply made the gateway ready.
func (s *startup) register(reg prometheus.Registerer) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgelb_startup_seconds",
		Help: "How long each start-up phase took (config, checks, writer, apply), and the total from process start to ready."},
		[]string{"phase"})
	var total time.Duration
	for _, p := range s.phases {
		g.WithLabelValues(p.name).Set(p.took.Seconds())
		total += p.took
	}
	g.WithLabelValues("total").Set(total.Seconds())
	_ = reg.Register(g) // a second ready (never) would find it registered
}

// readyGate is set once the daemon's ready callback ran (sd_notify READY,
// the ready log line, the start-up metrics).
type readyGate struct{ atomic.Bool }

// ready answers not converged until the gate is set, then what next says.
func (g *readyGate) ready(next func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if !g.Load() {
			return effects.ErrNotConverged
		}
		return next(ctx)
	}
}
