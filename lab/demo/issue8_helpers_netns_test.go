//go:build netns

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// labConfig renders a daemon config for the demo lab with one service
// "web" (VIP port 80 → backends :8080) and the given extra service keys
// (method, healthCheck...) and top-level sections (health...).
type labConfig struct {
	Method      string // "" = nat
	HealthCheck string // YAML flow mapping, "" = none
	AllDown     string // "" = default (keep)
	Mode        string // dataplane mode, "" = auto
	TargetPort  int    // 0 = BackendPort
	Port        int    // 0 = 80
}

func (c labConfig) render(l *Lab, stateDir, apiListen, tokenFile string) string {
	var b strings.Builder
	port, target, mode := c.Port, c.TargetPort, c.Mode
	if port == 0 {
		port = 80
	}
	if target == 0 {
		target = int(BackendPort)
	}
	if mode == "" {
		mode = "auto"
	}
	fmt.Fprintf(&b, "pools:\n  - name: demo\n    addresses: [%q]\nservices:\n  - name: web\n    pool: demo\n    scheduler: rr\n", PoolRange)
	if c.Method != "" {
		fmt.Fprintf(&b, "    method: %s\n", c.Method)
	}
	fmt.Fprintf(&b, "    ports:\n      - {name: http, port: %d, protocol: TCP, targetPort: %d}\n    backends:\n", port, target)
	for _, be := range l.Backends {
		fmt.Fprintf(&b, "      - {address: %q, weight: 1}\n", be.Addr.Addr().String())
	}
	if c.HealthCheck != "" {
		fmt.Fprintf(&b, "    healthCheck: %s\n", c.HealthCheck)
	}
	if c.AllDown != "" {
		fmt.Fprintf(&b, "health:\n  allDown: %s\n", c.AllDown)
	}
	fmt.Fprintf(&b, "announce:\n  l2:\n    interface: %s\ndataplane:\n  mode: %s\n  nodeAddresses: [%q]\napi:\n  listen: %s\n  tokenFile: %s\nstate:\n  dir: %s\n",
		l.FrontIf, mode, GatewayFront.Addr(), apiListen, tokenFile, stateDir)
	return b.String()
}

const apiAddr = "127.0.0.1:8080"

// apiPoll is how often a test may poll the REST API for as long as it likes:
// the daemon allows 20 requests/s per client (burst 40, webui.Options) and
// answers 429 beyond it, so a 10 ms poll that waits more than ~0.5 s is
// refused (CI saw it: TestNetnsHealthKillAndRestart). Kernel state is polled
// faster; the API figures are good to one apiPoll.
const apiPoll = 50 * time.Millisecond

// issue8Lab is the demo lab with the real daemon running a labConfig.
type issue8Lab struct {
	*Lab
	d    *Daemon
	logs *bytes.Buffer
	api  *http.Client
	cfg  string // config file path
}

// newLab builds the lab and writes cfg, without starting the daemon.
func newLab(t *testing.T, c labConfig) *issue8Lab {
	t.Helper()
	netns.RequireRoot(t)
	lab, err := New(Options{Prefix: netns.Unique("elb8")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(DemoToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(c.render(lab, filepath.Join(dir, "state"), apiAddr, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &issue8Lab{Lab: lab, logs: &bytes.Buffer{}, api: lab.Gateway.HTTPClient(5 * time.Second), cfg: cfg}
}

// startIssue8Lab builds the lab and runs the daemon until it is ready.
func startIssue8Lab(t *testing.T, c labConfig) *issue8Lab {
	t.Helper()
	exe := edgelbBinary(t)
	l := newLab(t, c)
	w := &syncWriter{w: l.logs}
	d, err := l.StartDaemon(exe, l.cfg, w, w)
	if err != nil {
		t.Fatal(err)
	}
	l.d = d
	t.Cleanup(func() {
		d.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("daemon log:\n%s", l.logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.WaitAPI(ctx, apiAddr, d); err != nil {
		t.Fatalf("%v\n%s", err, l.logs.String())
	}
	return l
}

// backendHealth is the REST API's view of one checked backend.
type backendHealth struct {
	Service     string    `json:"service"`
	Backend     string    `json:"backend"`
	Healthy     bool      `json:"healthy"`
	Since       time.Time `json:"since"`
	LastError   string    `json:"lastError"`
	Checks      uint64    `json:"checks"`
	Failures    uint64    `json:"failures"`
	Transitions uint64    `json:"transitions"`
}

func (l *issue8Lab) health(t *testing.T) map[string]backendHealth {
	t.Helper()
	resp, err := l.api.Get("http://" + apiAddr + "/api/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []backendHealth
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/health: %s %v", resp.Status, err)
	}
	out := map[string]backendHealth{}
	for _, h := range list {
		out[h.Backend] = h
	}
	return out
}

// metrics returns the lines of /metrics that start with prefix.
func (l *issue8Lab) metrics(t *testing.T, prefix string) []string {
	t.Helper()
	resp, err := l.api.Get("http://" + apiAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}

// do sends an API request with the demo token.
func (l *issue8Lab) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+apiAddr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+DemoToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.api.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// nftBackends lists the backend addresses present in the gateway's edgelb
// nftables table: what new connections can be sent to right now.
func (l *issue8Lab) nftBackends(t *testing.T) map[string]bool {
	t.Helper()
	out, err := l.Gateway.Exec(context.Background(), "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, b := range l.Backends {
		if regexp.MustCompile(regexp.QuoteMeta(b.Addr.Addr().String()) + `\b`).Match(out) {
			got[b.Name] = true
		}
	}
	return got
}

// stopBackend closes a backend's server: new connections are refused.
func stopBackend(b *Backend) { b.srv.Close() }

// restartBackend serves again on the same address until the test ends.
func restartBackend(t *testing.T, b *Backend) {
	t.Helper()
	if err := b.start(); err != nil {
		t.Fatal(err)
	}
	srv := b.srv
	t.Cleanup(func() { srv.Close() })
}

// result is one client request: when it started and how it ended.
type result struct {
	at      time.Time
	backend string
	err     error
}

// load sends a request (new connection) every period from the client until
// stopped, recording every result.
type load struct {
	mu   sync.Mutex
	res  []result
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func startLoad(l *Lab, url string, period, timeout time.Duration) *load {
	ctx, cancel := context.WithCancel(context.Background())
	ld := &load{stop: cancel}
	c := l.Client.HTTPClient(timeout)
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ld.wg.Add(1)
			go func() {
				defer ld.wg.Done()
				at := time.Now()
				name, err := l.Get(context.Background(), c, url)
				ld.mu.Lock()
				ld.res = append(ld.res, result{at: at, backend: name, err: err})
				ld.mu.Unlock()
			}()
		}
	}()
	return ld
}

// Stop ends the load and waits for requests in flight.
func (ld *load) Stop() { ld.stop(); ld.wg.Wait() }

// between returns per-backend successes and the failures of requests that
// started in [from, to).
func (ld *load) between(from, to time.Time) (ok map[string]int, failed int, lastErr error) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ok = map[string]int{}
	for _, r := range ld.res {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		if r.err != nil {
			failed++
			lastErr = r.err
		} else {
			ok[r.backend]++
		}
	}
	return ok, failed, lastErr
}

// lastFailure is the start of the last failed request (zero if none).
func (ld *load) lastFailure() time.Time {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	var last time.Time
	for _, r := range ld.res {
		if r.err != nil && r.at.After(last) {
			last = r.at
		}
	}
	return last
}

// waitFor polls cond every step until it holds or timeout passes; it
// returns when it first held.
func waitFor(t *testing.T, what string, timeout, step time.Duration, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(step)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
