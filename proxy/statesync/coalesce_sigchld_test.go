//go:build linux && (amd64 || arm64)

package statesync

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestQuietChildStops: once quieted, stopping and continuing a child sends
// no SIGCHLD, its exit still does, and the runtime's handler stays.
func TestQuietChildStops(t *testing.T) {
	before, err := readSigchld()
	if err != nil {
		t.Fatal(err)
	}
	if before.handler <= 1 {
		t.Fatalf("SIGCHLD has no handler (%#x): the Go runtime installs one", before.handler)
	}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	// A stop and continue that the child lived through: a SIGCONT sent
	// before the child got to stop cancels the stop unseen.
	stopCont := func() {
		t.Helper()
		if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); procStateOf(child.Process.Pid) != 'T'; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the child did not stop within 10 s")
			}
		}
		if err := child.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	if before.flags&saNoCldStop == 0 {
		// Not yet quieted: the stop is seen (the test can see one).
		stopCont()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no SIGCHLD for a stopped child before quieting")
		}
	}
	quietChildStops()
	if quietErr != nil {
		t.Fatal(quietErr)
	}
	after, err := readSigchld()
	if err != nil {
		t.Fatal(err)
	}
	if after.flags&saNoCldStop == 0 || after.handler != before.handler || after.flags&^saNoCldStop != before.flags&^saNoCldStop || after.mask != before.mask {
		t.Fatalf("sigaction before %+v, after %+v: want only SA_NOCLDSTOP added", before, after)
	}
	// Drain what the first stop and continue sent: the continue's may
	// still be on its way (the child reports it when it next runs, and
	// the runtime forwards it to ch from another goroutine); one sent
	// after the flag was set is not sent at all.
	for drain := time.After(time.Second); ; {
		select {
		case <-ch:
			continue
		case <-drain:
		}
		break
	}
	stopCont()
	stopCont()
	// Signals are delivered before kill(2) returns to a process that does
	// not block them; the Go runtime forwards them to ch at once. 200 ms
	// is for that hop only.
	select {
	case <-ch:
		t.Fatal("SIGCHLD for a stopped/continued child with SA_NOCLDSTOP set")
	case <-time.After(200 * time.Millisecond):
	}
	child.Process.Kill()
	child.Wait()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no SIGCHLD for a child's exit")
	}
	if again, _ := readSigchld(); again != after {
		t.Fatalf("signal.Notify/Stop changed the sigaction: %+v, was %+v", again, after)
	}
}

func procStateOf(pid int) byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return procState(b)
}
