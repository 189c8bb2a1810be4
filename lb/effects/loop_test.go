package effects

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/fake"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

type flakyDP struct {
	mu      sync.Mutex
	fail    bool
	applied []proxy.Config
	resyncs int
}

func (f *flakyDP) Apply(_ context.Context, c proxy.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("kernel says no")
	}
	f.applied = append(f.applied, c)
	return nil
}
func (f *flakyDP) Resync(context.Context) error { f.mu.Lock(); f.resyncs++; f.mu.Unlock(); return nil }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) { // a hang guard
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A VIP is announced only while the dataplane serves it; a failing Apply
// withdraws it and is retried until it succeeds.
func TestEffectsWithdrawWhileDataplaneFails(t *testing.T) {
	dp := &flakyDP{fail: true}
	ann := &fake.Announcer{}
	reg := prometheus.NewRegistry()
	e := New(Options{Dataplane: dp, Announcers: []Announcer{ann}, Resync: 20 * time.Millisecond, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan lb.Desired, 1)
	ready := make(chan struct{})
	go e.Run(ctx, in, func() { close(ready) })
	vip := announce.VIP{Addr: netip.MustParseAddr("192.0.2.100")}
	in <- lb.Desired{Dataplane: proxy.Config{Services: []proxy.Service{{VIP: vip.Addr, Port: 80, Protocol: proxy.TCP}}}, VIPs: []announce.VIP{vip}}
	eventually(t, "an empty announcement while the dataplane fails", func() bool { v, n := ann.Last(); return n > 0 && len(v) == 0 })
	select {
	case <-ready:
		t.Fatal("ready before the dataplane converged")
	default:
	}
	dp.mu.Lock()
	dp.fail = false
	dp.mu.Unlock()
	<-ready
	eventually(t, "the VIP announced after the retry", func() bool { v, _ := ann.Last(); return len(v) == 1 && v[0].Addr == vip.Addr })
	if ok, err, _ := e.Status(); !ok || err != nil {
		t.Fatalf("status ok=%v err=%v", ok, err)
	}
	// The metrics say the same: failed applies, then one that converged,
	// then resyncs (which run only while converged).
	eventually(t, "a resync counted", func() bool {
		return testutil.ToFloat64(e.m.syncs.WithLabelValues("resync", "ok")) >= 1
	})
	if n := testutil.ToFloat64(e.m.syncs.WithLabelValues("apply", "error")); n < 1 {
		t.Errorf("failed applies counted %v, want ≥ 1", n)
	}
	if n := testutil.ToFloat64(e.m.syncs.WithLabelValues("apply", "ok")); n != 1 {
		t.Errorf("applies counted ok %v, want 1", n)
	}
	if c := testutil.ToFloat64(e.m.converged); c != 1 {
		t.Errorf("converged %v, want 1", c)
	}
	if ts := testutil.ToFloat64(e.m.last.WithLabelValues("apply")); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last apply timestamp %v", ts)
	}
	if n, err := testutil.GatherAndCount(reg, "edgelb_dataplane_sync_duration_seconds"); err != nil || n != 2 {
		t.Errorf("duration series %d (%v), want 2 (apply, resync)", n, err)
	}
}
