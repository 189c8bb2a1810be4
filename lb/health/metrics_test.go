package health

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgelb/edgelb/lb"
)

// TestMetricsAndStatus: a TCP backend goes down and comes back; the
// transition counters, the healthy gauge and Status agree with the events.
func TestMetricsAndStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(ln.Addr().String())
	go acceptAll(ln)
	reg := prometheus.NewRegistry()
	r := &recorder{ch: make(chan Event, 10)}
	c := New(Options{OnChange: r.on, Registerer: reg})
	defer c.Close()
	// The down path is a refused connect (at once), never a timeout: a
	// generous Timeout keeps a starved prober from failing three checks on a
	// live listener, which would add a down/up pair to the counters below.
	tg := Target{Service: "web", Backend: addr,
		Check: lb.HealthCheck{Type: "tcp", Interval: 10 * time.Millisecond, Timeout: 10 * time.Second, Rise: 2, Fall: 3}}
	c.Set([]Target{tg})
	gauge := func() float64 { return testutil.ToFloat64(c.met.healthy.WithLabelValues("web", addr.String())) }
	trans := func(to string) float64 {
		return testutil.ToFloat64(c.met.transitions.WithLabelValues("web", addr.String(), to))
	}
	if gauge() != 1 {
		t.Fatalf("a new target starts healthy: gauge %v", gauge())
	}
	ln.Close()
	waitEvent(t, r, false)
	if gauge() != 0 || trans("down") != 1 || trans("up") != 0 {
		t.Fatalf("after going down: healthy=%v down=%v up=%v", gauge(), trans("down"), trans("up"))
	}
	if st := c.Status(); len(st) != 1 || st[0].Healthy || st[0].Transitions != 1 || st[0].LastError == "" {
		t.Fatalf("status after going down: %+v", st)
	}
	ln2, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Skipf("port %s taken again by someone else: %v", addr, err)
	}
	defer ln2.Close()
	go acceptAll(ln2)
	waitEvent(t, r, true)
	if gauge() != 1 || trans("down") != 1 || trans("up") != 1 {
		t.Fatalf("after coming back: healthy=%v down=%v up=%v", gauge(), trans("down"), trans("up"))
	}
	st := c.Status()
	if len(st) != 1 || !st[0].Healthy || st[0].Transitions != 2 || st[0].LastError != "" {
		t.Fatalf("status after coming back: %+v", st)
	}
	if n := testutil.ToFloat64(c.met.checks.WithLabelValues("web", addr.String(), "fail")); n < 3 {
		t.Fatalf("failed checks counted %v, want at least fall=3", n)
	}
	c.Set(nil)
	if n, err := testutil.GatherAndCount(reg, "edgelb_backend_healthy"); err != nil || n != 0 {
		t.Fatalf("gauge of a removed target stays: %d series, %v", n, err)
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
