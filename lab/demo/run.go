package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config renders the daemon's config for the lab: one pool on the client's
// segment (so ARP is what brings the client to the gateway), one service
// with a VIP port and a node port over the three backends.
func (l *Lab) Config(stateDir, apiListen, scheduler, tokenFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# edgelb demo lab (generated)
pools:
  - name: demo
    addresses: ["%s"]
services:
  - name: web
    pool: demo
    scheduler: %s
    ports:
      - {name: http, port: 80, protocol: TCP, targetPort: %d, nodePort: %d}
    backends:
`, PoolRange, scheduler, BackendPort, NodePort)
	for _, be := range l.Backends {
		fmt.Fprintf(&b, "      - {address: %q, weight: 1}\n", be.Addr.String())
	}
	fmt.Fprintf(&b, `announce:
  l2:
    interface: %s
dataplane:
  mode: auto
  nodeAddresses: ["%s"]
api:
  listen: %s
  tokenFile: %s
state:
  dir: %s
`, l.FrontIf, GatewayFront.Addr(), apiListen, tokenFile, stateDir)
	return b.String()
}

// DemoToken authorises writes in the demo lab (a throwaway lab, not a secret).
const DemoToken = "edgelb-demo-token"

// Daemon is the real edgelb daemon running as a child process inside the
// gateway namespace.
type Daemon struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid once done is closed
}

// StartDaemon starts `exe run --config cfgPath` inside the gateway namespace.
// The child inherits the namespace of the thread that forks it, so no `ip
// netns exec` is needed.
func (l *Lab) StartDaemon(exe, cfgPath string, stdout, stderr io.Writer, extraArgs ...string) (*Daemon, error) {
	cmd := exec.Command(exe, append([]string{"run", "--config", cfgPath}, extraArgs...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := l.Gateway.Do(cmd.Start); err != nil {
		return nil, fmt.Errorf("start daemon in %s: %w", l.Gateway.Name, err)
	}
	d := &Daemon{cmd: cmd, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	return d, nil
}

// PID of the daemon process.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Done is closed when the daemon has exited; Err then tells how.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err is the daemon's exit status once Done is closed.
func (d *Daemon) Err() error {
	<-d.done
	return d.err
}

// Stop sends SIGTERM and waits (SIGKILL after the timeout). Safe to call
// again after the daemon exited: it returns the same status.
func (d *Daemon) Stop(timeout time.Duration) error {
	select {
	case <-d.done:
		return d.err
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return d.err
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("daemon did not stop within %s: killed: %w", timeout, d.err)
	}
}

// WaitAPI waits until the daemon's API answers /readyz inside the gateway namespace.
func (l *Lab) WaitAPI(ctx context.Context, listen string, d *Daemon) error {
	return l.WaitAPIEvery(ctx, listen, d, 100*time.Millisecond)
}

// WaitAPIEvery is WaitAPI polling every interval (a start-up figure needs
// a finer clock than 100 ms).
func (l *Lab) WaitAPIEvery(ctx context.Context, listen string, d *Daemon, every time.Duration) error {
	c := l.Gateway.HTTPClient(time.Second)
	for {
		resp, err := c.Get("http://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-d.done:
			return fmt.Errorf("daemon exited before becoming ready: %v", d.err)
		case <-ctx.Done():
			return fmt.Errorf("daemon not ready: %w (last: %v)", ctx.Err(), err)
		case <-time.After(every):
		}
	}
}

// Forward listens on hostAddr in the caller's namespace (loopback) and
// relays each connection to target inside the gateway namespace, so a browser
// on the host reaches the daemon's API.
func (l *Lab) Forward(hostAddr, target string) (net.Listener, error) {
	ln, err := net.Listen("tcp", hostAddr)
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", hostAddr, err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				u, err := l.Gateway.DialContext(ctx, "tcp", target)
				cancel()
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, u)
			}()
		}
	}()
	return ln, nil
}

// Traffic sends requests from the client namespace and counts answers per backend.
type Traffic struct {
	mu      sync.Mutex
	counts  map[string]int
	errs    int
	lastErr error
}

// Snapshot returns per-backend counts and the error count.
func (t *Traffic) Snapshot() (map[string]int, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.counts))
	for k, v := range t.counts {
		out[k] = v
	}
	return out, t.errs, t.lastErr
}

// Run sends requests to url at about rate per second until ctx ends.
func (l *Lab) Run(ctx context.Context, url string, rate int) *Traffic {
	t := &Traffic{counts: map[string]int{}}
	c := l.Client.HTTPClient(2 * time.Second)
	go func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			go func() {
				name, err := l.Get(ctx, c, url)
				t.mu.Lock()
				defer t.mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						t.errs++
						t.lastErr = err
					}
					return
				}
				t.counts[name]++
			}()
		}
	}()
	return t
}

// Format renders counts as "backend-1=12 backend-2=11 ...".
func Format(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	return strings.Join(parts, " ")
}

// Options for a whole demo run.
type RunOptions struct {
	Exe      string        // the edgelb binary
	Duration time.Duration // 0: until ctx ends (Ctrl-C)
	UIAddr   string        // host-side address for the UI (default 127.0.0.1:8080)
	Out      io.Writer
	Rate     int // requests per second (default 20)
}

// RunDemo builds the lab, runs the daemon in the gateway, drives traffic and
// reports. It returns nil only when every backend was reached. Everything is
// removed before it returns.
func RunDemo(ctx context.Context, o RunOptions) (err error) {
	if o.UIAddr == "" {
		o.UIAddr = "127.0.0.1:8080"
	}
	if o.Rate == 0 {
		o.Rate = 20
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	lab, err := New(Options{})
	if err != nil {
		return fmt.Errorf("build lab: %w", err)
	}
	defer func() { err = errors.Join(err, lab.Close()) }()
	dir, err := os.MkdirTemp("", "edgelb-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const apiListen = "127.0.0.1:8080"
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(DemoToken+"\n"), 0o600); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(lab.Config(filepath.Join(dir, "state"), apiListen, "rr", token)), 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(o.Out, "lab: client %s — gateway %s/%s — backends %s\n", lab.Client.Name, GatewayFront.Addr(), GatewayBack.Addr(), backendList(lab))
	d, err := lab.StartDaemon(o.Exe, cfg, logf, logf)
	if err != nil {
		return err
	}
	defer func() {
		if serr := d.Stop(10 * time.Second); serr != nil {
			err = errors.Join(err, fmt.Errorf("daemon stop: %w", serr))
		}
		if err != nil {
			tail, _ := os.ReadFile(logf.Name())
			fmt.Fprintf(o.Out, "--- daemon log ---\n%s\n", lastLines(string(tail), 30))
		}
		// The daemon removes its nft table on a clean stop; say so if it did not.
		if out, _ := lab.Gateway.Exec(context.Background(), "nft", "list", "tables"); strings.Contains(string(out), "edgelb") {
			fmt.Fprintf(o.Out, "note: nft tables left in the lab gateway: %s", out)
		}
	}()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = lab.WaitAPI(readyCtx, apiListen, d)
	cancel()
	if err != nil {
		return err
	}
	fwd, err := lab.Forward(o.UIAddr, apiListen)
	if err != nil {
		fmt.Fprintf(o.Out, "UI not forwarded to the host: %v\n", err)
	} else {
		defer fwd.Close()
		fmt.Fprintf(o.Out, "UI: http://%s  (REST: http://%s/api/v1/services; API token for writes: %s)\n", o.UIAddr, o.UIAddr, DemoToken)
	}
	vipURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(VIP, 80))
	npURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(GatewayFront.Addr(), NodePort))
	fmt.Fprintf(o.Out, "traffic: client → VIP %s and NodePort %s, %d req/s; Ctrl-C to stop\n", vipURL, npURL, o.Rate)
	vip := lab.Run(ctx, vipURL, o.Rate)
	np := lab.Run(ctx, npURL, max(1, o.Rate/4))
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	report := func() {
		vc, ve, vl := vip.Snapshot()
		nc, ne, _ := np.Snapshot()
		fmt.Fprintf(o.Out, "[%s] VIP: %s errors=%d | NodePort: %s errors=%d\n", time.Now().Format("15:04:05"), Format(vc), ve, Format(nc), ne)
		if vl != nil && ve > 0 {
			fmt.Fprintf(o.Out, "   last error: %v\n", vl)
		}
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-d.Done():
			return fmt.Errorf("daemon exited: %v", d.Err())
		case <-tick.C:
			report()
		}
	}
	time.Sleep(200 * time.Millisecond) // let in-flight requests land
	report()
	vc, _, _ := vip.Snapshot()
	nc, _, _ := np.Snapshot()
	var missing []string
	for _, be := range lab.Backends {
		if vc[be.Name] == 0 {
			missing = append(missing, be.Name+" (VIP)")
		}
		if nc[be.Name] == 0 {
			missing = append(missing, be.Name+" (NodePort)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("backends never reached: %s", strings.Join(missing, ", "))
	}
	fmt.Fprintln(o.Out, "every backend was reached through the VIP and the NodePort")
	return nil
}

func backendList(l *Lab) string {
	var s []string
	for _, b := range l.Backends {
		s = append(s, b.Addr.String())
	}
	return strings.Join(s, ", ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
