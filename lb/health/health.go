// Package health runs active health checks against backends — TCP connect
// or HTTP(S) GET with an expected status — with rise/fall hysteresis and a
// bound on checks in flight, and reports transitions. It is declarative: Set
// takes every target that should be checked now; probes for targets that
// left stop, new ones start, unchanged ones keep their state.
//
// A new backend starts healthy (a fresh service serves at once, as with
// keepalived and HAProxy) and goes down after Fall consecutive failures; it
// comes back after Rise consecutive successes.
package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/lb"
)

// Target is one backend of one service and the check to run against it
// (lb.ServiceSpec.HealthTargets lists a service's).
type Target = lb.HealthTarget

type key struct {
	service string
	backend netip.AddrPort
}

// Event is a transition of a target between healthy and unhealthy.
type Event struct {
	Target  Target
	Healthy bool
	// Err is the last failure when going down.
	Err error
	At  time.Time
}

// State is what the API shows for one target.
type State struct {
	Service   string    `json:"service"`
	Backend   string    `json:"backend"`
	Healthy   bool      `json:"healthy"`
	LastError string    `json:"lastError,omitempty"`
	Since     time.Time `json:"since"`
	Checks    uint64    `json:"checks"`
	Failures  uint64    `json:"failures"`
	// Transitions counts changes between healthy and unhealthy.
	Transitions uint64 `json:"transitions"`
}

// Options configure a Checker.
type Options struct {
	// MaxInFlight bounds concurrent checks across all targets (default 64).
	MaxInFlight int
	// OnChange is called (from a probe goroutine, never concurrently for one
	// target) on every transition.
	OnChange func(Event)
	Logger   *slog.Logger
	// Dialer dials TCP checks and HTTP connections (tests inject a namespace's dialer).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// Registerer, when set, receives the checker's metrics
	// (edgelb_health_transitions_total, edgelb_health_checks_total,
	// edgelb_backend_healthy).
	Registerer prometheus.Registerer
}

// Checker owns the probe goroutines.
type Checker struct {
	opts   Options
	met    *metrics
	sem    chan struct{}
	client *http.Client

	mu     sync.Mutex
	probes map[key]*probe
	closed bool
}

type probe struct {
	t      Target
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state State
}

// New returns a Checker with no targets.
func New(opts Options) *Checker {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Dialer == nil {
		opts.Dialer = (&net.Dialer{}).DialContext
	}
	c := &Checker{opts: opts, met: newMetrics(opts.Registerer), sem: make(chan struct{}, opts.MaxInFlight), probes: map[key]*probe{}}
	c.client = &http.Client{
		Transport: &http.Transport{
			DialContext:       opts.Dialer,
			DisableKeepAlives: true, // every check is a fresh connection, like a new client's
			// A health check proves the backend answers; identity is the
			// operator's business (backends often use self-signed certificates).
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			Proxy:           nil,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// Set declares every target to check. Changed checks restart their probe
// (and their state); removed targets stop.
func (c *Checker) Set(targets []Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	want := make(map[key]Target, len(targets))
	for _, t := range targets {
		want[key{t.Service, t.Backend}] = t
	}
	for k, p := range c.probes {
		if t, ok := want[k]; !ok || t.Check != p.t.Check {
			p.cancel()
			delete(c.probes, k)
			if !ok {
				c.met.forget(p.t)
			}
		}
	}
	for k, t := range want {
		if _, ok := c.probes[k]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		p := &probe{t: t, cancel: cancel, done: make(chan struct{}),
			state: State{Service: t.Service, Backend: t.Backend.String(), Healthy: true, Since: time.Now()}}
		c.probes[k] = p
		c.met.state(t, true, false)
		go c.run(ctx, p)
	}
}

// Status returns every target's state, sorted.
func (c *Checker) Status() []State {
	c.mu.Lock()
	out := make([]State, 0, len(c.probes))
	for _, p := range c.probes {
		p.mu.Lock()
		out = append(out, p.state)
		p.mu.Unlock()
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service < out[j].Service
		}
		return out[i].Backend < out[j].Backend
	})
	return out
}

// Close stops every probe and waits for them.
func (c *Checker) Close() {
	c.mu.Lock()
	c.closed = true
	probes := c.probes
	c.probes = map[key]*probe{}
	c.mu.Unlock()
	for _, p := range probes {
		p.cancel()
	}
	for _, p := range probes {
		<-p.done
	}
}

func (c *Checker) run(ctx context.Context, p *probe) {
	defer close(p.done)
	hc := p.t.Check
	tick := time.NewTicker(hc.Interval)
	defer tick.Stop()
	var okRun, failRun int
	for {
		select {
		case <-ctx.Done():
			return
		case c.sem <- struct{}{}:
		}
		err := c.check(ctx, p.t)
		<-c.sem
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.state.Checks++
		healthy := p.state.Healthy
		if err != nil {
			p.state.Failures++
			p.state.LastError = err.Error()
			okRun, failRun = 0, failRun+1
		} else {
			okRun, failRun = okRun+1, 0
		}
		changed := false
		switch {
		case healthy && failRun >= max(hc.Fall, 1):
			p.state.Healthy, changed = false, true
		case !healthy && okRun >= max(hc.Rise, 1):
			p.state.Healthy, changed = true, true
			p.state.LastError = ""
		}
		if changed {
			p.state.Since = time.Now()
			p.state.Transitions++
		}
		st := p.state
		p.mu.Unlock()
		c.met.checked(p.t, err)
		if changed {
			c.met.state(p.t, st.Healthy, true)
			c.opts.Logger.Info("backend health changed", "service", p.t.Service, "backend", p.t.Backend.String(),
				"healthy", st.Healthy, "error", st.LastError)
			if c.opts.OnChange != nil {
				c.opts.OnChange(Event{Target: p.t, Healthy: st.Healthy, Err: err, At: st.Since})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ErrStatus is returned when an HTTP check gets an unexpected status.
var ErrStatus = errors.New("unexpected HTTP status")

func (c *Checker) check(ctx context.Context, t Target) error {
	hc := t.Check
	ctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	defer cancel()
	addr := t.Backend
	if hc.Port != 0 {
		addr = netip.AddrPortFrom(addr.Addr(), hc.Port)
	}
	switch hc.Type {
	case "", "tcp":
		conn, err := c.opts.Dialer(ctx, "tcp", addr.String())
		if err != nil {
			return fmt.Errorf("tcp connect %s: %w", addr, err)
		}
		return conn.Close()
	case "http", "https":
		path := hc.Path
		if path == "" {
			path = "/"
		}
		url := hc.Type + "://" + addr.String() + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("health check request %q: %w", url, err)
		}
		if hc.Host != "" {
			req.Host = hc.Host
		}
		req.Header.Set("User-Agent", "edgelb-health/1")
		resp, err := c.client.Do(req)
		if err != nil {
			return fmt.Errorf("GET %s: %w", url, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		want := hc.Expect
		if want == 0 {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			return fmt.Errorf("GET %s: %w %d (want %s)", url, ErrStatus, resp.StatusCode, strconv.Itoa(want))
		}
		return nil
	}
	return fmt.Errorf("health check type %q: %w", hc.Type, errors.ErrUnsupported)
}
