package effects

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/fake"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
	proxyfake "github.com/edgelb/edgelb/proxy/fake"
)

// TestEffectsRefusalIsPerService (issue 14): with a dataplane refusing as
// nftables does, one service it cannot program (lc) is reported refused —
// the callback, the metric — while the other 9 are programmed and their
// VIPs stay announced; only the refused one's VIP is withdrawn. Before,
// one refusal withdrew every VIP.
func TestEffectsRefusalIsPerService(t *testing.T) {
	dp := proxyfake.New(proxyfake.NFTablesOptions)
	ann := &fake.Announcer{}
	reg := prometheus.NewRegistry()
	reported := make(chan map[string]string, 4)
	e := New(Options{Dataplane: dp, Announcers: []Announcer{ann}, Resync: time.Hour, Registerer: reg,
		Refused: func(m map[string]string) { reported <- m }})
	var d lb.Desired
	for i := range 10 {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})
		s := proxy.Service{Name: fmt.Sprintf("svc%d", i), VIP: vip, Port: 80, Protocol: proxy.TCP, Scheduler: proxy.RoundRobin,
			Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("198.51.100.2:8080"), Weight: 1}}}
		if i == 3 {
			s.Scheduler = proxy.LeastConn
		}
		d.Dataplane.Services = append(d.Dataplane.Services, s)
		d.VIPs = append(d.VIPs, announce.VIP{Addr: vip})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := make(chan lb.Desired, 1)
	ready := make(chan struct{})
	go e.Run(ctx, in, func() { close(ready) })
	in <- d
	select {
	case <-ready:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("not ready: a per-service refusal kept the gateway from converging")
	}
	got := <-reported
	if len(got) != 1 || got["svc3"] == "" {
		t.Fatalf("reported refused %v, want only svc3", got)
	}
	t.Logf("refused: %v", got)
	vips, _ := ann.Last()
	if len(vips) != 9 {
		t.Fatalf("announced %d VIPs, want the 9 programmed ones", len(vips))
	}
	for _, v := range vips {
		if v.Addr == d.VIPs[3].Addr {
			t.Errorf("the refused service's VIP %s is announced", v.Addr)
		}
	}
	if n := testutil.ToFloat64(e.m.refusedBy.WithLabelValues("svc3")); n != 1 {
		t.Errorf("edgelb_dataplane_service_refused{service=svc3} = %v, want 1", n)
	}
	if n := testutil.CollectAndCount(e.m.refusedBy); n != 1 {
		t.Errorf("%d refused series, want 1", n)
	}
	if ok, _, _ := e.Status(); !ok {
		t.Error("not ready with 9 of 10 services programmed")
	}
	t.Logf("announced %d of %d VIPs; kernel holds %d services", len(vips), len(d.VIPs), countServices(dp.Transcript()))

	// Fixed: the refusal clears, everywhere.
	d2 := d
	d2.Dataplane.Services = append([]proxy.Service(nil), d.Dataplane.Services...)
	d2.Dataplane.Services[3].Scheduler = proxy.RoundRobin
	in <- d2
	if got := <-reported; len(got) != 0 {
		t.Fatalf("after the fix reported %v, want none", got)
	}
	eventually(t, "all 10 VIPs announced", func() bool { v, _ := ann.Last(); return len(v) == 10 })
	if n := testutil.CollectAndCount(e.m.refusedBy); n != 0 {
		t.Errorf("%d refused series after the fix, want 0", n)
	}
}

func countServices(transcript string) int {
	n := 0
	for i := 0; i+8 <= len(transcript); i++ {
		if (i == 0 || transcript[i-1] == '\n') && transcript[i:i+8] == "service " {
			n++
		}
	}
	return n
}
