package conntrack

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Sysctls the flow view needs, per network namespace: byte and packet
// counters (off by default, and only entries created after it is switched on
// get them) and start timestamps (so a flow's age survives a restart of edgelb).
var accountingSysctls = []string{
	"/proc/sys/net/netfilter/nf_conntrack_acct",
	"/proc/sys/net/netfilter/nf_conntrack_timestamp",
}

// EnableAccounting switches on conntrack byte/packet accounting and start
// timestamps in the network namespace netnsFD (0: the caller's). Call it
// before traffic flows: counters are attached when a connection is created.
func EnableAccounting(netnsFD int) error {
	write := func() error {
		var errs []error
		for _, p := range accountingSysctls {
			if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("conntrack: enable %s: %w", p, err))
			}
		}
		return errors.Join(errs...)
	}
	if netnsFD == 0 {
		return write()
	}
	// /proc/sys/net shows the namespace of the thread that opens the file:
	// do the writes on a locked thread switched into netnsFD. If switching
	// back fails the thread stays locked and dies with its goroutine.
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("conntrack: open own netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(netnsFD, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("conntrack: enter netns: %w", err)
			return
		}
		werr := write()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(werr, fmt.Errorf("conntrack: leave netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- werr
	}()
	return <-errc
}
