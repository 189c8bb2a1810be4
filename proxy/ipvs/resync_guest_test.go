//go:build ipvsguest

package ipvs

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/nftables"
	mobyipvs "github.com/moby/ipvs"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestIPVSGuestResyncWindow: at 1,000 services × 10 a quiet resync reads the
// service table once and the destinations of 1/spread of the services, and
// leaves the nftables table alone; a real server deleted by hand is back
// within spread resyncs, a service deleted by hand and a frontend deleted from
// the nftables table by hand are back at the next resync. The quiet resync is
// timed against spread 1 (every service read and the table rebuilt, as every
// resync did before) in the same guest.
func TestIPVSGuestResyncWindow(t *testing.T) {
	requireIPVS(t)
	ctx := context.Background()
	n := netns.NewT(t, "ivw")
	d := newIn(t, n, Options{Logf: func(string, ...any) {}})
	defer d.Close()
	defer d.Cleanup(ctx)
	cfg := benchConfig(1)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	resync := func() (SyncStats, time.Duration) {
		t.Helper()
		t0 := time.Now()
		if err := d.Resync(ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		return d.LastSync(), time.Since(t0)
	}
	spread := d.eng.spread
	// Quiet resyncs: one window each.
	var quiet time.Duration
	for i := 0; i < spread; i++ {
		st, took := resync()
		quiet += took
		if want := (benchServices + spread - 1) / spread; st.DestReads != want || st.NFTRebuilt || st.Full {
			t.Fatalf("quiet resync %d: %+v, want %d destination reads and no rebuild", i+1, st, want)
		}
	}
	// As before: every service read and the table rebuilt.
	d.eng.spread, d.eng.fullEvery = 1, 1
	var full time.Duration
	const fullRounds = 2
	for i := 0; i < fullRounds; i++ {
		st, took := resync()
		full += took
		if st.DestReads != benchServices || !st.NFTRebuilt {
			t.Fatalf("full resync: %+v", st)
		}
	}
	d.eng.spread, d.eng.fullEvery = spread, DefaultFullEvery
	qm, fm := quiet.Seconds()*1000/float64(spread), full.Seconds()*1000/fullRounds
	t.Logf("MEASURED ipvs resync of %d services × %d, nothing changed: %.1f ms with the window (%d destination reads), %.1f ms reading all and rebuilding the nftables table (ratio %.3f; under TCG)",
		benchServices, benchBackends, qm, (benchServices+spread-1)/spread, fm, qm/fm)

	// Hand edits.
	h, err := mobyipvs.New(nsPath(n))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	svc := cfg.Services[700]
	ms := &mobyipvs.Service{Address: net.IP(svc.VIP.AsSlice()), Port: svc.Port, Protocol: uint16(svc.Protocol),
		AddressFamily: family(svc.VIP), Netmask: defaultNetmask(svc.VIP)}
	be := svc.Backends[3].Addr
	if err := h.DelDestination(ms, &mobyipvs.Destination{Address: net.IP(be.Addr().AsSlice()), Port: be.Port(),
		AddressFamily: family(be.Addr())}); err != nil {
		t.Fatal(err)
	}
	dests := func(s *mobyipvs.Service) int {
		ds, err := h.GetDestinations(s)
		if err != nil {
			return -1
		}
		return len(ds)
	}
	repaired := 0
	for i := 1; i <= spread && repaired == 0; i++ {
		resync()
		if dests(ms) == benchBackends {
			repaired = i
		}
	}
	if repaired == 0 {
		t.Fatalf("a real server deleted by hand was not back after %d resyncs", spread)
	}
	t.Logf("MEASURED ipvs hand-deleted real server repaired by resync %d (spread %d)", repaired, spread)

	gone := cfg.Services[300]
	gs := &mobyipvs.Service{Address: net.IP(gone.VIP.AsSlice()), Port: gone.Port, Protocol: uint16(gone.Protocol),
		AddressFamily: family(gone.VIP), Netmask: defaultNetmask(gone.VIP)}
	if err := h.DelService(gs); err != nil {
		t.Fatal(err)
	}
	// A frontend deleted from the nftables table by hand (another program's commit).
	c, err := nftables.New(nftables.WithNetNSFd(int(d.ns)))
	if err != nil {
		t.Fatal(err)
	}
	o := objs()
	k := vsKey{Addr: gone.VIP, Port: gone.Port, Proto: proxy.TCP}
	if err := c.SetDeleteElements(o.front4, []nftables.SetElement{{Key: setKey(k)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("delete a frontend element by hand: %v", err)
	}
	st, _ := resync()
	if dests(gs) != benchBackends || !st.NFTRebuilt {
		t.Fatalf("resync after a service and a frontend deleted by hand: %d destinations, %+v", dests(gs), st)
	}
	els, err := c.GetSetElements(&nftables.Set{Table: o.t, Name: o.front4.Name, KeyType: keyType4, Concatenation: true})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range els {
		if string(e.Key) == string(setKey(k)) {
			found = true
		}
	}
	if !found || len(els) != benchServices {
		t.Fatalf("frontends4 after the resync: %d elements, the deleted one back: %v", len(els), found)
	}
	t.Logf("service and nftables frontend deleted by hand: both back at the next resync (%d frontends)", len(els))
	if st, _ := resync(); st.NFTRebuilt {
		t.Fatalf("the resync after the repair rebuilt the table again: %+v", st)
	}
}
