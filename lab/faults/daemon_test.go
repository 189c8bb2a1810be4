//go:build netns || k8s

package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
)

// apiListen is where the daemon's REST API listens inside the gateway.
const apiListen = "127.0.0.1:8080"

// env is the demo lab (client, gateway, backends) with the real daemon
// started and restarted in its gateway namespace.
type env struct {
	t       *testing.T
	lab     *demo.Lab
	dir     string
	cfgPath string
	token   string // token file
	exe     string
	d       *demo.Daemon
	logs    *logbuf.Buffer
	api     *http.Client // from inside the gateway
}

func newEnv(t *testing.T, prefix string, backends int) *env {
	t.Helper()
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	lab, err := demo.New(demo.Options{Prefix: netns.Unique(prefix), Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, lab: lab, dir: t.TempDir(), exe: exe, logs: &logbuf.Buffer{}}
	if p := os.Getenv("EDGELB_FAULTS_LOG"); p != "" { // follow the daemon's log live
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		e.logs.Tee = f
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	// The bulk pool is not on the client's segment: route it to the gateway.
	if err := lab.Client.AddRoute(netip.MustParsePrefix(bulkPool), demo.GatewayFront.Addr()); err != nil {
		t.Fatal(err)
	}
	e.cfgPath = filepath.Join(e.dir, "config.yaml")
	e.token = filepath.Join(e.dir, "token")
	if err := os.WriteFile(e.token, []byte(demo.DemoToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.api = lab.Gateway.HTTPClient(30 * time.Second)
	// Registered after the lab's cleanup, so it runs first: the daemon
	// stops before its namespace goes away.
	t.Cleanup(func() {
		if e.d != nil {
			e.d.Stop(20 * time.Second)
		}
		if t.Failed() {
			t.Logf("daemon log (tail):\n%s", e.logs.Tail(60))
		}
	})
	return e
}

func (e *env) writeConfig(cfg string) {
	e.t.Helper()
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// start writes cfg and starts the daemon without waiting for it.
func (e *env) start(cfg string) {
	e.t.Helper()
	if e.d != nil {
		select {
		case <-e.d.Done():
		default:
			e.t.Fatal("start: the previous daemon is still running")
		}
	}
	e.writeConfig(cfg)
	e.launch()
}

// launch starts the daemon on the config file as written, without waiting.
func (e *env) launch() {
	e.t.Helper()
	fmt.Fprintf(e.logs, "----- daemon start %s -----\n", time.Now().Format(time.RFC3339Nano))
	d, err := e.lab.StartDaemon(e.exe, e.cfgPath, e.logs, e.logs)
	if err != nil {
		e.t.Fatal(err)
	}
	e.d = d
}

// waitReady waits until /readyz says the dataplane converged.
func (e *env) waitReady(limit time.Duration) time.Duration {
	e.t.Helper()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := e.lab.WaitAPI(ctx, apiListen, e.d); err != nil {
		e.t.Fatalf("%v\n%s", err, e.logs.Tail(40))
	}
	return time.Since(t0)
}

// readyAt returns when /readyz first said ready, polled every 10 ms: a
// start-up figure must not carry waitReady's 100 ms between polls.
func (e *env) readyAt(limit time.Duration) time.Time {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := e.lab.WaitAPIEvery(ctx, apiListen, e.d, 10*time.Millisecond); err != nil {
		e.t.Fatalf("%v\n%s", err, e.logs.Tail(40))
	}
	return time.Now()
}

// kill9 kills the daemon with SIGKILL (no shutdown path runs) and reaps it.
func (e *env) kill9() {
	e.t.Helper()
	if err := syscall.Kill(e.d.PID(), syscall.SIGKILL); err != nil {
		e.t.Fatalf("kill -9 %d: %v", e.d.PID(), err)
	}
	select {
	case <-e.d.Done():
	case <-time.After(10 * time.Second):
		e.t.Fatal("daemon not reaped 10 s after SIGKILL")
	}
}

func (e *env) signal(sig syscall.Signal) {
	e.t.Helper()
	if err := syscall.Kill(e.d.PID(), sig); err != nil {
		e.t.Fatalf("kill -%d %d: %v", sig, e.d.PID(), err)
	}
}

// alive fails the test when the daemon has exited.
func (e *env) alive() {
	e.t.Helper()
	select {
	case <-e.d.Done():
		e.t.Fatalf("daemon exited: %v\n%s", e.d.Err(), e.logs.Tail(40))
	default:
	}
}

// rest sends one authorised request to the daemon's API.
func (e *env) rest(method, path, body string) (int, string) {
	e.t.Helper()
	// The API limits each client to 20 requests a second and answers 429
	// beyond; a test's polls must not read that as the daemon's answer (a
	// metric read as 0 made startup_config_s=0.000 in TestNetnsIdleCost).
	for end := time.Now().Add(30 * time.Second); ; {
		req, err := http.NewRequest(method, "http://"+apiListen+path, strings.NewReader(body))
		if err != nil {
			e.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+demo.DemoToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := e.api.Do(req)
		if err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20)) // /metrics with 50,000 services is megabytes
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(end) {
			return resp.StatusCode, string(b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procStatus reads fields of /proc/PID/status (VmRSS, VmHWM...) in KiB.
func procStatus(pid int, fields ...string) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		for _, f := range fields {
			if rest, ok := strings.CutPrefix(l, f+":"); ok {
				v := strings.Fields(rest)
				if len(v) > 0 {
					n, _ := strconv.ParseInt(v[0], 10, 64)
					out[f] = n
				}
			}
		}
	}
	return out, nil
}

// waitFor polls ok every step until it holds or limit passes; it returns
// how long that took and whether it held.
func waitFor(limit, step time.Duration, ok func() bool) (time.Duration, bool) {
	t0 := time.Now()
	for {
		if ok() {
			return time.Since(t0), true
		}
		if time.Since(t0) > limit {
			return time.Since(t0), false
		}
		time.Sleep(step)
	}
}
