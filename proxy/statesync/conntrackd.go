package statesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/edgelb/edgelb/proxy/child"
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
	// heardAt: when a read first saw the last packet from the peer, or the
	// first read while none was seen; lastPacket: the former only (peer.go).
	heardAt    time.Time
	lastPacket time.Time
	clock      func() time.Time // nil: time.Now (tests set one)
}

var _ Syncer = (*Conntrackd)(nil)

// cmdTimeout bounds one conntrackd client command.
const (
	cmdTimeout = 5 * time.Second
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
	c := &Conntrackd{opts: opts, log: log.With("statesync", "conntrackd"), done: make(chan struct{}), ready: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.supervise()
	go c.watchPeer()
	return c, nil
}

// supervise runs conntrackd until Close (proxy/child: restarted with
// backoff, dies with edgelb).
func (c *Conntrackd) supervise() {
	defer close(c.done)
	var ready chan struct{}
	child.Run(c.ctx, c.log, child.Spec{
		Name:    "conntrackd",
		Command: func() *exec.Cmd { return exec.Command(c.opts.Binary, "-C", ConfPath(c.opts.Dir)) },
		// A conntrackd killed with edgelb leaves its lock file and socket:
		// it refuses to start while the lock file exists.
		Prepare: func() {
			os.Remove(LockPath(c.opts.Dir))
			os.Remove(SocketPath(c.opts.Dir))
		},
		// "[Mon Nov 23 11:30:15 2026] (pid=6749) [notice] text": the text.
		Line: func(line string) string {
			if i := strings.LastIndex(line, "] "); i >= 0 && strings.HasPrefix(line, "[") {
				return line[i+2:]
			}
			return line
		},
		Started: func(pid int, exited <-chan struct{}) {
			c.mu.Lock()
			c.pid, c.running = pid, true
			c.starts++
			ready = c.ready
			c.mu.Unlock()
			go c.whenReady(ready, exited)
		},
		Exited: func(err error, ran time.Duration) {
			c.mu.Lock()
			c.running, c.pid = false, 0
			c.ready = make(chan struct{})
			c.mu.Unlock()
			if c.ctx.Err() == nil {
				c.fail(fmt.Errorf("conntrackd exited after %s: %v", ran.Round(time.Millisecond), err))
			}
		},
	})
}

// whenReady waits for the new conntrackd to answer, then takes the steps of
// the role this gateway has now.
func (c *Conntrackd) whenReady(ready chan struct{}, exited <-chan struct{}) {
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

// command runs one conntrackd client command against the running daemon.
func (c *Conntrackd) command(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.opts.Binary, append([]string{"-C", ConfPath(c.opts.Dir)}, args...)...)
	cmd.Env = child.Env()
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

// Status implements Syncer: the counters of the last background read
// (peer.go; at most PeerPoll old, the queue at most a second) and the
// peer's state now.
func (c *Conntrackd) Status() Status {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, peers := c.opts.channel()
	st := Status{Kind: "conntrackd", Channel: ch, Peers: peers, Running: c.running, PID: c.pid,
		Restarts: max(0, c.starts-1), Role: "backup", Stats: c.stats, Errors: c.errors, LastError: c.lastErr,
		LastTakeover: c.takeover, LastTakeoverTook: c.took, LastPacket: c.lastPacket}
	st.PeerState, st.PeerSilence = peerView(now, c.running, c.heardAt)
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
