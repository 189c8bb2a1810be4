// Package nsthread runs a function inside another network namespace.
// Some kernel state is per namespace and reached through files that
// resolve against the calling thread's namespace (/proc/sys/net,
// /proc/thread-self/net): a netlink library takes a namespace fd, but
// reading or writing those files needs a thread inside the namespace.
package nsthread

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace nsfd (in
// place for 0). The thread is locked for the call; one that cannot switch
// back stays locked and is thrown away with its goroutine, so no other
// goroutine ever runs in the wrong namespace.
func Do(nsfd int, fn func() error) error {
	if nsfd == 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter the network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave the network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
