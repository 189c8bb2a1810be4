package bfdd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy/child"
)

// DefaultBinary is where Debian's frr package puts bfdd.
const DefaultBinary = "/usr/lib/frr/bfdd"

// Timeouts of a vty command and of bfdd's start (its restarts: proxy/child).
const (
	cmdTimeout   = 5 * time.Second
	readyTimeout = 10 * time.Second
)

// ErrNotRunning is returned by States while bfdd is not (yet) answering.
var ErrNotRunning = errors.New("bfdd is not running")

// Options place and run bfdd.
type Options struct {
	// Binary is bfdd's path (default DefaultBinary).
	Binary string
	// Dir holds bfdd's sockets, pid file and (empty) config file; it is
	// created and handed to the frr user when edgelb runs as root and that
	// user exists (bfdd then drops to it, and must reach Dir: every parent
	// must be searchable by frr). Empty: a new directory under
	// $RUNTIME_DIRECTORY or the temporary directory, removed by Close.
	Dir    string
	Logger *slog.Logger
}

// Runner is what the BGP speaker needs from a BFD implementation: a
// declarative session set and a snapshot of every session's state.
// *Daemon is the real one, *Fake the test double.
type Runner interface {
	// Set makes the sessions exactly these (keyed by peer address).
	Set(ctx context.Context, sessions []Session) error
	// States reads every session's state in one pass.
	States(ctx context.Context) ([]State, error)
	Close() error
}

// Daemon runs and supervises one bfdd.
type Daemon struct {
	opts Options
	log  *slog.Logger
	vty  *vty
	as   runAs // who bfdd runs as (privs.go)
	// tempDir is removed by Close (Options.Dir was empty).
	tempDir string

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// applyMu orders configuration passes (Set and the one after a start).
	applyMu sync.Mutex
	mu      sync.Mutex
	want    map[string]Session // by key()
	applied map[string]Session // what the running bfdd has
	ready   bool
	starts  int
}

var _ Runner = (*Daemon)(nil)

// Start checks the binary, prepares Dir and starts bfdd under supervision
// (restarted with backoff when it exits; dies with edgelb). Sessions are
// set with Set, also after a restart of bfdd.
func Start(opts Options) (*Daemon, error) {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := exec.LookPath(opts.Binary); err != nil {
		return nil, fmt.Errorf("bfd: bfdd binary %q (Debian: apt-get install frr): %w", opts.Binary, err)
	}
	// FRR's own identity checks, before bfdd runs (privs.go): a bfdd that
	// exits at start leaves BGP up without the protection asked for.
	as, err := currentIdentity().plan(osUsers{})
	if err != nil {
		return nil, fmt.Errorf("bfd: %w", err)
	}
	tempDir := ""
	if opts.Dir == "" {
		parent := os.Getenv("RUNTIME_DIRECTORY")
		if parent == "" {
			parent = os.TempDir()
		}
		dir, err := os.MkdirTemp(parent, "edgelb-bfdd-")
		if err != nil {
			return nil, fmt.Errorf("bfd: %w", err)
		}
		opts.Dir, tempDir = dir, dir
	}
	d := &Daemon{tempDir: tempDir, opts: opts, log: log.With("bfd", "bfdd"), vty: &vty{path: filepath.Join(opts.Dir, "bfdd.vty")},
		done: make(chan struct{}), want: map[string]Session{}, applied: map[string]Session{}, as: as}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("bfd: %w", err)
	}
	if as.switchTo {
		// bfdd's pid and socket files are created as frr.
		os.Chmod(opts.Dir, 0o750)
		if err := os.Chown(opts.Dir, as.uid, as.gid); err != nil {
			return nil, fmt.Errorf("bfd: hand %s to the frr user: %w", opts.Dir, err)
		}
	}
	conf := filepath.Join(opts.Dir, "bfdd.conf")
	if err := os.WriteFile(conf, []byte("! sessions are set by edgelb over the vty socket\n"), 0o640); err != nil {
		return nil, fmt.Errorf("bfd: %w", err)
	}
	if as.switchTo {
		os.Chown(conf, as.uid, as.gid)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	go d.supervise()
	return d, nil
}

func (d *Daemon) args() []string {
	dir := d.opts.Dir
	a := []string{"-f", filepath.Join(dir, "bfdd.conf"), "-i", filepath.Join(dir, "bfdd.pid"),
		// A zebra socket nobody serves: bfdd needs no zebra for sessions
		// keyed by address, and must not talk to a zebra of the host's.
		"-z", filepath.Join(dir, "zserv.api"), "--vty_socket", dir, "--bfdctl", filepath.Join(dir, "bfdd.sock"),
		"-A", "127.0.0.1", "-P", "0", "--log", "stdout"}
	return append(a, "-u", d.as.user, "-g", d.as.group)
}

// supervise runs bfdd until Close (proxy/child: restarted with backoff,
// dies with edgelb).
func (d *Daemon) supervise() {
	defer close(d.done)
	child.Run(d.ctx, d.log, child.Spec{
		Name:    "bfdd",
		Command: d.command,
		Prepare: func() {
			for _, f := range []string{"bfdd.vty", "bfdd.sock", "bfdd.pid"} {
				os.Remove(filepath.Join(d.opts.Dir, f))
			}
		},
		Started: func(_ int, exited <-chan struct{}) {
			d.mu.Lock()
			d.starts++
			d.mu.Unlock()
			go d.whenReady(exited)
		},
		Exited: func(error, time.Duration) {
			d.vty.close()
			d.mu.Lock()
			d.ready = false
			clear(d.applied)
			d.mu.Unlock()
		},
	})
}

func (d *Daemon) command() *exec.Cmd {
	cmd := exec.Command(d.opts.Binary, d.args()...)
	if d.as.switchTo {
		// Started as frr already, with the capabilities bfdd keeps
		// (CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_SYS_ADMIN), rather than
		// letting bfdd switch users itself: a credential change clears the
		// parent-death signal, and a bfdd that outlived a killed edgelb would
		// keep telling the router the gateway is alive (and hold the BFD port
		// against the next edgelb's bfdd). Go sets the signal after the switch.
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: uint32(d.as.uid), Gid: uint32(d.as.gid), Groups: d.as.groups},
			AmbientCaps: []uintptr{unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_RAW, unix.CAP_SYS_ADMIN},
		}
	}
	return cmd
}

// whenReady waits for bfdd's vty to answer, then sets every wanted session.
func (d *Daemon) whenReady(exited <-chan struct{}) {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(d.ctx, time.Second)
		_, err := d.vty.run(ctx, "show bfd peers brief")
		cancel()
		if err == nil {
			break
		}
		d.vty.close()
		if time.Now().After(deadline) || d.ctx.Err() != nil {
			d.log.Error("bfdd did not answer on its vty socket", "within", readyTimeout, "err", err)
			return
		}
		select {
		case <-exited:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.mu.Lock()
	d.ready = true
	d.mu.Unlock()
	if err := d.apply(d.ctx); err != nil {
		d.log.Error("bfdd: set sessions", "err", err)
	}
}

// Set implements Runner. Sessions are applied now when bfdd runs, else
// once it answers.
func (d *Daemon) Set(ctx context.Context, sessions []Session) error {
	want := map[string]Session{}
	for _, s := range sessions {
		if err := s.Validate(); err != nil {
			return err
		}
		want[s.key()] = s
	}
	d.mu.Lock()
	d.want = want
	d.mu.Unlock()
	return d.apply(ctx)
}

// apply brings the running bfdd's sessions to d.want: removes the sessions
// no longer wanted, creates or updates the others.
func (d *Daemon) apply(ctx context.Context) error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.mu.Lock()
	if !d.ready {
		d.mu.Unlock()
		return nil
	}
	want := maps.Clone(d.want)
	applied := maps.Clone(d.applied)
	d.mu.Unlock()
	cmds := []string{"configure terminal", "bfd"}
	for _, k := range slices.Sorted(maps.Keys(applied)) {
		if _, ok := want[k]; !ok {
			cmds = append(cmds, "no "+k)
		}
	}
	changed := false
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if old, ok := applied[k]; ok && old == want[k] {
			continue
		}
		cmds = append(cmds, want[k].commands()...)
		changed = true
	}
	if !changed && len(cmds) == 2 {
		return nil
	}
	cmds = append(cmds, "end")
	if _, err := d.vty.run(ctx, cmds...); err != nil {
		// Leave the configuration node whatever happened: a new connection
		// starts outside it.
		d.vty.close()
		return fmt.Errorf("bfd: set sessions: %w", err)
	}
	d.mu.Lock()
	if d.ready {
		d.applied = want
	}
	d.mu.Unlock()
	return nil
}

// States implements Runner.
func (d *Daemon) States(ctx context.Context) ([]State, error) {
	d.mu.Lock()
	ready := d.ready
	d.mu.Unlock()
	if !ready {
		return nil, ErrNotRunning
	}
	peers, err := d.vty.run(ctx, "show bfd peers json")
	if err != nil {
		return nil, err
	}
	counters, err := d.vty.run(ctx, "show bfd peers counters json")
	if err != nil {
		return nil, err
	}
	return parseStates([]byte(peers), []byte(counters))
}

// Close stops bfdd (its sessions go down; peers see AdminDown or silence).
func (d *Daemon) Close() error {
	d.cancel()
	<-d.done
	if d.tempDir != "" {
		os.RemoveAll(d.tempDir)
	}
	return nil
}
