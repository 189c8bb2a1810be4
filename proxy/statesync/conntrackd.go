package statesync

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Conntrackd runs and supervises conntrackd and drives its failover steps.
type Conntrackd struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// cmdMu orders client commands: a takeover's four steps are not
	// interleaved with a release's or a restart's.
	cmdMu sync.Mutex

	mu       sync.Mutex
	owned    int // VIPs this gateway answers for (primary when > 0)
	pid      int
	running  bool
	ready    chan struct{} // closed once the current conntrackd answers
	starts   int
	errors   uint64
	lastErr  string
	takeover time.Time
	took     time.Duration
	stats    Stats
	statsAt  time.Time
	heardAt  time.Time // the last read that saw RecvPackets grow (or the start)
}

var _ Syncer = (*Conntrackd)(nil)

// Backoff between restarts of a conntrackd that exited: doubling from
// restartMin to restartMax, back to restartMin once one ran restartReset.
const (
	restartMin   = 200 * time.Millisecond
	restartMax   = 10 * time.Second
	restartReset = 30 * time.Second
	cmdTimeout   = 5 * time.Second
	statsMaxAge  = time.Second
)

// Start writes conntrackd.conf into opts.Dir and starts conntrackd under
// supervision (restarted with backoff when it exits). It returns once the
// configuration is written; conntrackd comes up in the background as a
// backup (Restart's steps).
func Start(opts Options, log *slog.Logger) (*Conntrackd, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conf, err := Render(opts)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(opts.Binary); err != nil {
		return nil, fmt.Errorf("statesync: conntrackd binary %q: %w", opts.Binary, err)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("statesync: %w", err)
	}
	if err := os.WriteFile(ConfPath(opts.Dir), []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("statesync: %w", err)
	}
	if opts.SetSysctls {
		// Entries committed from a peer carry no TCP window data and a
		// returning gateway may hold stale ones for the same tuples: strict
		// window tracking would mark the connection's packets invalid (and
		// so untranslated). conntrack-tools' manual asks for this setting.
		if err := os.WriteFile("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal", []byte("1"), 0o644); err != nil {
			log.Warn("statesync: cannot set nf_conntrack_tcp_be_liberal=1 (set it in /etc/sysctl.d)", "err", err)
		}
	}
	c := &Conntrackd{opts: opts, log: log.With("statesync", "conntrackd"), done: make(chan struct{}), ready: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.supervise()
	return c, nil
}

// supervise runs conntrackd until Close, restarting it with backoff. The
// goroutine keeps its OS thread: the child's parent-death signal is tied to
// the thread that started it, so conntrackd dies with edgelb (kill -9
// included) and never outlives it as a stale sync source.
func (c *Conntrackd) supervise() {
	runtime.LockOSThread()
	defer close(c.done)
	backoff := restartMin
	for c.ctx.Err() == nil {
		// A conntrackd killed with edgelb leaves its lock file and socket:
		// it refuses to start while the lock file exists.
		os.Remove(LockPath(c.opts.Dir))
		os.Remove(SocketPath(c.opts.Dir))
		t0 := time.Now()
		err := c.runOnce()
		if c.ctx.Err() != nil {
			return
		}
		c.fail(fmt.Errorf("conntrackd exited after %s: %v", time.Since(t0).Round(time.Millisecond), err))
		if time.Since(t0) >= restartReset {
			backoff = restartMin
		}
		c.log.Warn("conntrackd exited; restarting", "err", err, "in", backoff)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartMax)
	}
}

func (c *Conntrackd) runOnce() error {
	cmd := exec.Command(c.opts.Binary, "-C", ConfPath(c.opts.Dir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Env = childEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.pid, c.running = cmd.Process.Pid, true
	c.starts++
	starts := c.starts
	ready := c.ready
	c.mu.Unlock()
	c.log.Info("conntrackd started", "pid", cmd.Process.Pid, "conf", ConfPath(c.opts.Dir), "start", starts)
	logged := make(chan struct{})
	go func() { c.logLines(out); close(logged) }()
	exited := make(chan error, 1)
	go func() { <-logged; exited <- cmd.Wait() }()
	go c.whenReady(ready, exited)

	var err2 error
	select {
	case err2 = <-exited:
	case <-c.ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err2 = <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			err2 = <-exited
		}
	}
	c.mu.Lock()
	c.running, c.pid = false, 0
	c.ready = make(chan struct{})
	c.mu.Unlock()
	return err2
}

// whenReady waits for the new conntrackd to answer, then takes the steps of
// the role this gateway has now.
func (c *Conntrackd) whenReady(ready chan struct{}, exited <-chan error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.command(context.Background(), "-s"); err == nil {
			break
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			c.fail(errors.New("conntrackd did not answer on its control socket within 10 s"))
			return
		}
		select {
		case <-exited:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.cmdMu.Lock()
	c.mu.Lock()
	primary := c.owned > 0
	close(ready)
	c.mu.Unlock()
	c.run(context.Background(), Restart(primary))
	c.cmdMu.Unlock()
}

// Ready returns a channel closed once the current conntrackd answers and
// has taken its start steps.
func (c *Conntrackd) Ready() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

func (c *Conntrackd) logLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// "[Mon Nov 23 11:30:15 2026] (pid=6749) [notice] text": the text.
		if i := strings.LastIndex(line, "] "); i >= 0 && strings.HasPrefix(line, "[") {
			line = line[i+2:]
		}
		if line != "" {
			c.log.Info("conntrackd: " + line)
		}
	}
}

// childEnv is edgelb's environment without systemd's notification socket:
// conntrackd must not report readiness in edgelb's name.
func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(s string) bool {
		return strings.HasPrefix(s, "NOTIFY_SOCKET=") || strings.HasPrefix(s, "LISTEN_")
	})
}

// command runs one conntrackd client command against the running daemon.
func (c *Conntrackd) command(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.opts.Binary, append([]string{"-C", ConfPath(c.opts.Dir)}, args...)...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("conntrackd %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// run takes steps in order; a failed step is counted and logged and the
// next one still runs (a commit that failed must not stop the bulk send).
// cmdMu is held by the caller.
func (c *Conntrackd) run(ctx context.Context, steps []Step) error {
	var errs []error
	for _, s := range steps {
		if _, err := c.command(ctx, s.Flag()); err != nil {
			c.fail(err)
			errs = append(errs, err)
		}
	}
	if len(steps) > 0 {
		c.log.Info("conntrackd steps", "steps", steps, "failed", len(errs))
	}
	return errors.Join(errs...)
}

func (c *Conntrackd) fail(err error) {
	c.mu.Lock()
	c.errors++
	c.lastErr = err.Error()
	c.mu.Unlock()
	c.log.Warn("statesync", "err", err)
}

// Gaining implements Syncer: primary-backup.sh's "primary" steps, before
// this gateway answers for vips. A failure is reported, and the takeover
// goes on: an unsynced VIP served is better than one not served.
func (c *Conntrackd) Gaining(ctx context.Context, vips []netip.Addr) error {
	c.cmdMu.Lock()
	defer c.cmdMu.Unlock()
	c.mu.Lock()
	c.owned += len(vips)
	c.mu.Unlock()
	t0 := time.Now()
	err := c.run(ctx, Takeover())
	c.mu.Lock()
	c.takeover, c.took = t0, time.Since(t0)
	c.mu.Unlock()
	return err
}

// Released implements Syncer: primary-backup.sh's "backup" steps once this
// gateway owns nothing.
func (c *Conntrackd) Released(ctx context.Context, vips []netip.Addr, owned int) error {
	c.cmdMu.Lock()
	defer c.cmdMu.Unlock()
	c.mu.Lock()
	c.owned = owned
	c.mu.Unlock()
	return c.run(ctx, Release(owned))
}

// Status implements Syncer; conntrackd's counters are read at most once a
// second (a client command is a process start).
func (c *Conntrackd) Status() Status {
	c.mu.Lock()
	running, fresh := c.running, time.Since(c.statsAt) < statsMaxAge
	c.mu.Unlock()
	if running && !fresh {
		if out, err := c.command(context.Background(), "-s"); err == nil {
			st := ParseStats(out)
			if q, err := c.command(context.Background(), "-s", "queue"); err == nil {
				ParseQueue(q, &st)
			}
			now := time.Now()
			c.mu.Lock()
			// != and not >: a restarted conntrackd counts from 0 again.
			if st.RecvPackets != c.stats.RecvPackets || c.heardAt.IsZero() {
				c.heardAt = now
			}
			c.stats, c.statsAt = st, now
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, peers := c.opts.channel()
	st := Status{Kind: "conntrackd", Channel: ch, Peers: peers, Running: c.running, PID: c.pid,
		Restarts: max(0, c.starts-1), Role: "backup", Stats: c.stats, Errors: c.errors, LastError: c.lastErr,
		LastTakeover: c.takeover, LastTakeoverTook: c.took}
	if !c.heardAt.IsZero() {
		st.PeerSilence = c.statsAt.Sub(c.heardAt)
	}
	if c.owned > 0 {
		st.Role = "primary"
	}
	return st
}

// Close implements Syncer: conntrackd gets SIGTERM (SIGKILL after 5 s).
func (c *Conntrackd) Close() error {
	c.cancel()
	<-c.done
	return nil
}
