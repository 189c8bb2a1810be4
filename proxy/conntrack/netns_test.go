//go:build netns

package conntrack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// ctLab builds client → gateway → backend namespaces; the gateway DNATs
// 203.0.113.10:80 to the backend's echo server at 198.51.100.2:8080 and sets
// edgelb's ct mark, with a hand-written nft table (a stand-in for proxy/nft;
// extra is added to the rule, e.g. "ct event set destroy,assured"). A plain
// echo listener on the gateway at 192.0.2.1:9000 gives an unmarked flow.
func ctLab(t *testing.T, extra string) (cli, gw *netns.NS, ctx context.Context) {
	netns.RequireRoot(t)
	cli, gw, be := netns.NewT(t, "ctc"), netns.NewT(t, "ctg"), netns.NewT(t, "ctb")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netns.Veth(cli, "eth0", gw, "cli0"))
	must(netns.Veth(be, "eth0", gw, "be0"))
	must(cli.AddAddr("eth0", netip.MustParsePrefix("192.0.2.2/24")))
	must(gw.AddAddr("cli0", netip.MustParsePrefix("192.0.2.1/24")))
	must(gw.AddAddr("be0", netip.MustParsePrefix("198.51.100.1/24")))
	must(be.AddAddr("eth0", netip.MustParsePrefix("198.51.100.2/24")))
	must(cli.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("192.0.2.1")))
	must(be.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("198.51.100.1")))
	must(gw.Sysctl("net.ipv4.ip_forward", "1"))
	// Counters are attached when an entry is created: switch them on first.
	must(EnableAccounting(int(gw.Handle())))
	if v, err := gw.ReadSysctl("net.netfilter.nf_conntrack_acct"); err != nil || v != "1" {
		t.Fatalf("nf_conntrack_acct in gateway ns = %q, %v", v, err)
	}

	ruleset := fmt.Sprintf(`table ip elbcttest {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr 203.0.113.10 tcp dport 80 ct mark set %#x %s dnat to 198.51.100.2:8080
  }
}
`, proxy.CTMark, extra)
	f := filepath.Join(t.TempDir(), "lb.nft")
	must(os.WriteFile(f, []byte(ruleset), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if out, err := gw.Exec(ctx, "nft", "-f", f); err != nil {
		t.Fatalf("nft: %v %s", err, out)
	}

	// Backend: echo server. Gateway: a plain listener reached directly
	// (an unmarked flow the source must not report).
	echo := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}
	bl, err := be.Listen("tcp", "198.51.100.2:8080")
	must(err)
	t.Cleanup(func() { bl.Close() })
	go echo(bl)
	gl, err := gw.Listen("tcp", "192.0.2.1:9000")
	must(err)
	t.Cleanup(func() { gl.Close() })
	go echo(gl)

	return cli, gw, ctx
}

// TestNetnsConntrackFlows (ctLab) checks that the Source dumps and
// watches exactly the marked flow, with counters, and not the unmarked one.
func TestNetnsConntrackFlows(t *testing.T) {
	cli, gw, ctx := ctLab(t, "")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	src, err := New(Options{NetNS: int(gw.Handle()), Resync: 300 * time.Millisecond})
	must(err)
	t.Cleanup(func() { src.Close() })

	var mu sync.Mutex
	var events []proxy.FlowEvent
	evSeen := make(chan struct{}, 100)
	wctx, wcancel := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- src.Watch(wctx, func(e proxy.FlowEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			select {
			case evSeen <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		wcancel()
		if err := <-watchDone; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	waitFor := func(what string, cond func([]proxy.FlowEvent) bool) time.Duration {
		t.Helper()
		start := time.Now()
		// A bound on a hang, not a figure: the events are printed as they
		// come, and a busy machine delays this reader, not the kernel.
		for time.Since(start) < 30*time.Second {
			mu.Lock()
			ok := cond(events)
			mu.Unlock()
			if ok {
				return time.Since(start)
			}
			select {
			case <-evSeen:
			case <-time.After(50 * time.Millisecond):
			}
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("timed out waiting for %s; events: %+v", what, events)
		return 0
	}

	direct, err := cli.DialContext(ctx, "tcp", "192.0.2.1:9000")
	must(err)
	defer direct.Close()
	roundTrip(t, direct, 100)

	t0 := time.Now()
	c, err := cli.DialContext(ctx, "tcp", "203.0.113.10:80")
	must(err)
	defer c.Close()
	clientAddr := netip.MustParseAddrPort(c.LocalAddr().String())
	roundTrip(t, c, 1000)
	isOurs := func(e proxy.FlowEvent) bool { return e.Flow.Client == clientAddr }
	d := waitFor("FlowNew of the VIP connection", func(evs []proxy.FlowEvent) bool {
		for _, e := range evs {
			if isOurs(e) && e.Type == proxy.FlowNew {
				return true
			}
		}
		return false
	})
	t.Logf("FlowNew seen %v after the connect (%v after the echo)", time.Since(t0).Round(time.Millisecond), d.Round(time.Millisecond))

	flows, err := src.Snapshot(ctx)
	must(err)
	var fl proxy.Flow
	for _, f := range flows {
		if f.Frontend.Addr() != netip.MustParseAddr("203.0.113.10") {
			t.Errorf("snapshot holds a flow that is not edgelb's: %+v", f)
		}
		if f.Client == clientAddr {
			fl = f
		}
	}
	if fl.ID == 0 {
		t.Fatalf("snapshot lacks the VIP flow from %v: %+v", clientAddr, flows)
	}
	if fl.Frontend.String() != "203.0.113.10:80" || fl.Backend.String() != "198.51.100.2:8080" || fl.Protocol != proxy.TCP ||
		fl.State != "ESTABLISHED" || fl.OrigBytes < 1000 || fl.ReplyBytes < 1000 || fl.OrigPackets == 0 || fl.Start.IsZero() {
		t.Fatalf("flow %+v", fl)
	}
	t.Logf("snapshot: %d flow(s); %s → %s → %s %s in %dB/%dp out %dB/%dp age %v",
		len(flows), fl.Client, fl.Frontend, fl.Backend, fl.State, fl.OrigBytes, fl.OrigPackets, fl.ReplyBytes, fl.ReplyPackets,
		time.Since(fl.Start).Round(time.Millisecond))

	// Counters change without a conntrack event: the periodic resync reports them.
	before := fl.OrigBytes
	roundTrip(t, c, 5000)
	d = waitFor("FlowUpdate with the new byte counts", func(evs []proxy.FlowEvent) bool {
		for _, e := range evs {
			if isOurs(e) && e.Type == proxy.FlowUpdate && e.Flow.OrigBytes >= before+5000 {
				return true
			}
		}
		return false
	})
	t.Logf("counter update via resync after %v", d.Round(time.Millisecond))

	// A state change: Watch does not follow update events (Options.Updates
	// unset), so the close reaches it by the next re-dump.
	c.Close()
	d = waitFor("FlowUpdate with the state after the close", func(evs []proxy.FlowEvent) bool {
		for _, e := range evs {
			if isOurs(e) && e.Type == proxy.FlowUpdate && e.Flow.State != "ESTABLISHED" {
				return true
			}
		}
		return false
	})
	t.Logf("state change via resync after %v", d.Round(time.Millisecond))

	// Removing the entry (as the kernel does on timeout) gives FlowDestroy.
	dc, err := ct.Dial(&netlink.Config{NetNS: int(gw.Handle())})
	must(err)
	defer dc.Close()
	raw, err := dc.Dump(nil)
	must(err)
	for _, r := range raw {
		if r.ID == uint32(fl.ID) {
			must(dc.Delete(r))
		}
	}
	d = waitFor("FlowDestroy", func(evs []proxy.FlowEvent) bool {
		for _, e := range evs {
			if isOurs(e) && e.Type == proxy.FlowDestroy && e.Flow.OrigBytes >= before+5000 {
				return true
			}
		}
		return false
	})
	t.Logf("FlowDestroy after %v", d.Round(time.Millisecond))

	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Flow.Frontend.Port() == 9000 {
			t.Errorf("event for the unmarked direct flow: %+v", e)
		}
	}
	t.Logf("%d events in all", len(events))
}

func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	buf := make([]byte, n)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
}

// TestNetnsConntrackAssuredOnly: with state sync the dataplane limits a
// VIP flow's events to "destroy" and "assured" (nft.Options.SyncEvents), so
// its first event is an update. With Options.Updates Watch reports the flow
// from that event; without, no event can bring it (the re-dump is an hour
// away here): the daemon sets Updates exactly when it sets SyncEvents.
func TestNetnsConntrackAssuredOnly(t *testing.T) {
	cli, gw, ctx := ctLab(t, "ct event set destroy,assured")
	for _, updates := range []bool{true, false} {
		src, err := New(Options{NetNS: int(gw.Handle()), Resync: time.Hour, Updates: updates})
		if err != nil {
			t.Fatal(err)
		}
		news := make(chan proxy.Flow, 16)
		dumped := make(chan struct{}, 1)
		src.resynced = func() {
			select {
			case dumped <- struct{}{}:
			default:
			}
		}
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- src.Watch(wctx, func(e proxy.FlowEvent) {
				if e.Type == proxy.FlowNew {
					news <- e.Flow
				}
			})
		}()
		// Watch listens, then dumps (an empty table): connections made
		// after the dump can reach it only as events.
		select {
		case <-dumped:
		case <-time.After(10 * time.Second):
			t.Fatal("Watch did not dump within 10 s")
		}
		// Connections through the VIP, one every 100 ms, each assured by
		// an echo round trip: with Updates until one is reported, without
		// for 1 s.
		clients := map[netip.AddrPort]bool{}
		var got bool
		limit := time.Now().Add(30 * time.Second) // a hang bound; the first reported flow ends it
		if !updates {
			limit = time.Now().Add(time.Second)
		}
		for !got && time.Now().Before(limit) {
			c, err := cli.DialContext(ctx, "tcp", "203.0.113.10:80")
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, 100)
			clients[netip.MustParseAddrPort(c.LocalAddr().String())] = true
			defer c.Close()
			tick := time.After(100 * time.Millisecond)
		drain:
			for {
				select {
				case f := <-news:
					got = got || clients[f.Client]
				case <-tick:
					break drain
				}
			}
		}
		wcancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
		src.Close()
		switch {
		case updates && !got:
			t.Errorf("Updates: none of %d flows, whose first event is their assured update, was reported within 30 s", len(clients))
		case !updates && got:
			t.Errorf("without Updates a flow was reported, yet no new event exists for it: the ruleset's event mask did not apply")
		}
	}
}
