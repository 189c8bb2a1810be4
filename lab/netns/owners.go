package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
)

// Ownership: every namespace New creates is recorded with the process that
// created it (pid and start time), and the record goes when Close deletes
// the namespace. A process killed before its cleanup ran — a test run out
// of time or killed with SIGKILL, a demo whose terminal closed — leaves its
// namespaces and the processes in them behind; the next New of any process
// sweeps every namespace whose creator is gone. Only recorded namespaces
// are ever swept: a namespace this package did not create is never touched.

// OwnerDir holds one record per namespace: the file is named as the
// namespace and holds "pid starttime" of its creator. /run is a tmpfs, as
// /run/netns is: both are empty after a reboot.
var OwnerDir = "/run/edgelb-lab/netns"

type owner struct {
	pid   int
	start uint64 // /proc/PID/stat field 22: a recycled pid has another
}

func (o owner) String() string { return fmt.Sprintf("%d %d", o.pid, o.start) }

// statFields returns the fields of /proc/PID/stat from field 3 (the state)
// on: the command name before them may hold spaces and parentheses.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return f, nil
}

// startTime reads a process's start time (field 22, clock ticks after boot).
func startTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

var self = sync.OnceValues(func() (owner, error) {
	st, err := startTime(os.Getpid())
	return owner{pid: os.Getpid(), start: st}, err
})

// alive reports whether o's process still runs (the same one, not a
// recycled pid).
func (o owner) alive() bool {
	st, err := startTime(o.pid)
	return err == nil && st == o.start
}

func readOwner(name string) (owner, bool) {
	b, err := os.ReadFile(filepath.Join(OwnerDir, name))
	if err != nil {
		return owner{}, false
	}
	var o owner
	if n, err := fmt.Sscanf(string(b), "%d %d", &o.pid, &o.start); err != nil || n != 2 {
		return owner{}, false
	}
	return o, true
}

// record writes name's owner before the namespace exists: a crash between
// the two leaves a record without a namespace, which a sweep drops, never
// a namespace without a record, which no sweep would find.
func record(name string) error {
	me, err := self()
	if err != nil {
		return fmt.Errorf("netns: own start time: %w", err)
	}
	if err := os.MkdirAll(OwnerDir, 0o755); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	tmp := filepath.Join(OwnerDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(me.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	return os.Rename(tmp, filepath.Join(OwnerDir, name))
}

func forget(name string) { _ = os.Remove(filepath.Join(OwnerDir, name)) }

// sweepOnce: one sweep per process, at its first New.
var sweepOnce sync.Once

// Sweep deletes every recorded namespace whose creator has exited, after
// killing the processes still in it, and returns their names. Namespaces
// of running processes and unrecorded ones are left alone.
func Sweep() ([]string, error) {
	ents, err := os.ReadDir(OwnerDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: sweep: %w", err)
	}
	var swept []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		o, ok := readOwner(name)
		if ok && o.alive() {
			continue
		}
		if err := reclaim(name); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, name)
	}
	return swept, errors.Join(errs...)
}

// reclaim kills the processes in a dead creator's namespace, deletes it
// and drops its record.
func reclaim(name string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		// Every process in it: a daemon or counterpart the dead test started.
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, err := exec.CommandContext(ctx, "ip", "netns", "pids", name).Output()
			cancel()
			if err != nil {
				return fmt.Errorf("netns: sweep %q: ip netns pids: %w", name, err)
			}
			pids := strings.Fields(string(out))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		switch err := netns.DeleteNamed(name); {
		case errors.Is(err, syscall.EINVAL): // not a mount (any more): the file alone is left
			if err := os.Remove(filepath.Join("/run/netns", name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("netns: sweep %q: %w", name, err)
			}
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("netns: sweep %q: %w", name, err)
		}
	}
	forget(name)
	return nil
}
