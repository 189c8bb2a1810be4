// Package child runs one helper daemon of edgelb's (conntrackd, FRR's bfdd)
// under supervision: started, its output logged line by line, restarted
// with backoff when it exits, stopped with SIGTERM (SIGKILL after 5 s) when
// edgelb stops, and killed with edgelb even by kill -9 (the parent-death
// signal). Both helpers need exactly this; the protocol each one speaks
// stays with its package.
package child

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Restart backoff: doubled after each exit, from Min up to Max, back to Min
// once a run lasted Reset.
const (
	RestartMin   = 200 * time.Millisecond
	RestartMax   = 10 * time.Second
	RestartReset = 30 * time.Second
	// StopWait is how long a child has to exit after SIGTERM.
	StopWait = 5 * time.Second
)

// Spec is one supervised daemon.
type Spec struct {
	// Name is the daemon's name in log lines ("conntrackd").
	Name string
	// Command returns the command of the next start. Run sets the
	// parent-death signal (SIGKILL) and a process group on its
	// SysProcAttr (keeping what else is set), its environment (edgelb's,
	// without systemd's notification and socket-activation variables: the
	// child must not report readiness in edgelb's name) when Env is nil,
	// and its output.
	Command func() *exec.Cmd
	// Prepare runs before each start (stale lock files and sockets of a
	// child killed with a previous edgelb).
	Prepare func()
	// Line turns an output line into its log text ("" drops it); nil
	// logs the line trimmed.
	Line func(string) string
	// Started runs (on Run's goroutine) once the child started; exited is
	// closed when it has exited. Readiness checks go in a goroutine here.
	Started func(pid int, exited <-chan struct{})
	// Exited runs after each exit of the child, the last one at stop
	// included (ctx is done then), with Wait's error and how long it ran.
	Exited func(err error, ran time.Duration)
}

// Run supervises s until ctx ends and the child has exited. It keeps its
// OS thread: the parent-death signal is tied to the thread that started the
// child, so the child dies with edgelb (kill -9 included) and never
// outlives it — a stale conntrackd as a sync source, a bfdd telling the
// router a dead gateway is alive.
func Run(ctx context.Context, log *slog.Logger, s Spec) {
	runtime.LockOSThread()
	backoff := RestartMin
	for ctx.Err() == nil {
		if s.Prepare != nil {
			s.Prepare()
		}
		t0 := time.Now()
		err := once(ctx, log, s)
		ran := time.Since(t0)
		if s.Exited != nil {
			s.Exited(err, ran)
		}
		if ctx.Err() != nil {
			return
		}
		if ran >= RestartReset {
			backoff = RestartMin
		}
		log.Warn(s.Name+" exited; restarting", "err", err, "after", ran.Round(time.Millisecond), "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, RestartMax)
	}
}

func once(ctx context.Context, log *slog.Logger, s Spec) error {
	cmd := s.Command()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig, cmd.SysProcAttr.Setpgid = syscall.SIGKILL, true
	if cmd.Env == nil {
		cmd.Env = Env()
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	log.Info(s.Name+" started", "pid", cmd.Process.Pid, "args", cmd.Args[1:])
	logged := make(chan struct{})
	go func() { logLines(log, s, out); close(logged) }()
	exited := make(chan struct{})
	var werr error
	go func() { <-logged; werr = cmd.Wait(); close(exited) }()
	if s.Started != nil {
		s.Started(cmd.Process.Pid, exited)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(StopWait):
			cmd.Process.Kill()
			<-exited
		}
	}
	return werr
}

func logLines(log *slog.Logger, s Spec, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if s.Line != nil {
			line = s.Line(line)
		}
		if line != "" {
			log.Info(s.Name + ": " + line)
		}
	}
}

// Env is edgelb's environment without NOTIFY_SOCKET and LISTEN_*.
func Env() []string {
	return slices.DeleteFunc(os.Environ(), func(s string) bool {
		return strings.HasPrefix(s, "NOTIFY_SOCKET=") || strings.HasPrefix(s, "LISTEN_")
	})
}
