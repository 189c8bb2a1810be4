package effects

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
)

// withCPU counts the CPU time its function used on its thread: the
// function spins until its own thread has used 10 ms (by the same clock), so
// the counter must show at least that.
func TestWithCPUCountsThreadTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	var spent time.Duration
	err := m.withCPU("resync", func() error {
		var r0, r unix.Rusage
		unix.Getrusage(unix.RUSAGE_THREAD, &r0)
		// A hang guard: with every core busy this thread gets a few % of
		// one, and 10 ms of CPU has taken a second of wall time.
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			unix.Getrusage(unix.RUSAGE_THREAD, &r)
			spent = time.Duration(r.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r.Stime.Nano()-r0.Stime.Nano())
			if spent >= 10*time.Millisecond {
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.ToFloat64(m.cpu.WithLabelValues("resync"))
	t.Logf("spun %v of thread CPU; counter %.4f s", spent, got)
	if spent < 10*time.Millisecond || got < spent.Seconds() {
		t.Fatalf("counter %.4f s, want ≥ %.4f s", got, spent.Seconds())
	}
}
