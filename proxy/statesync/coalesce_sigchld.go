//go:build linux && (amd64 || arm64)

package statesync

import (
	"sync"
	"syscall"
	"unsafe"
)

// quietChildStops sets SA_NOCLDSTOP on the SIGCHLD handler the Go runtime
// installed, keeping the handler itself and its other flags.
//
// Why: conntrackd runs as edgelb's child, so every SIGSTOP and SIGCONT of
// the gate also sends edgelb a SIGCHLD (CLD_STOPPED, CLD_CONTINUED), and
// each one wakes one of its sleeping threads to run a handler that then
// ignores it (nothing in edgelb asks for SIGCHLD: os/exec waits on the
// child itself). A gated gateway with two links takes four per interval,
// 20 a second at the default 200 ms. Measured by hand on the lab's VM (a
// stand-alone loop, not in the repository): a Go timer wake-up costs ~80 µs
// there, and stopping and continuing two children every 100 ms cost their
// Go parent 0.49–3.87 % of a core (median 0.79 %, 6 runs) with these
// signals and 0.35–1.06 % (median 0.55 %) without. SA_NOCLDSTOP is what
// POSIX gives a parent that does not want those: a child's exit still
// sends SIGCHLD, so nothing that waits for children changes. The runtime
// does not install the handler again (os/signal only masks and unmasks a
// signal it already handles).
func quietChildStops() { quietOnce.Do(func() { quietErr = setNoCldStop() }) }

var (
	quietOnce sync.Once
	quietErr  error
)

// sigaction is the kernel's struct sigaction on amd64 and arm64 (both
// have sa_restorer); only the flags are changed, the rest is written back
// as read.
type sigaction struct {
	handler, flags, restorer, mask uint64
}

const saNoCldStop = 0x1 // SA_NOCLDSTOP

func readSigchld() (sigaction, error) {
	var act sigaction
	_, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGCHLD), 0,
		uintptr(unsafe.Pointer(&act)), unsafe.Sizeof(act.mask), 0, 0)
	if e != 0 {
		return act, e
	}
	return act, nil
}

func setNoCldStop() error {
	act, err := readSigchld()
	if err != nil {
		return err
	}
	// SIG_DFL (0) or SIG_IGN (1): SIGCHLD is discarded, it wakes nothing.
	if act.handler <= 1 || act.flags&saNoCldStop != 0 {
		return nil
	}
	act.flags |= saNoCldStop
	_, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGCHLD),
		uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
