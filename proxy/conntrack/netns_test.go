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

// TestNetnsConntrackFlows builds client → gateway → backend namespaces, has
// the gateway DNAT a VIP and set edgelb's ct mark with a hand-written nft
// table (a stand-in for proxy/nft), and checks that the Source dumps and
// watches exactly the marked flow, with counters, and not the unmarked one.
func TestNetnsConntrackFlows(t *testing.T) {
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
    ip daddr 203.0.113.10 tcp dport 80 ct mark set %#x dnat to 198.51.100.2:8080
  }
}
`, proxy.CTMark)
	f := filepath.Join(t.TempDir(), "lb.nft")
	must(os.WriteFile(f, []byte(ruleset), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
		for time.Since(start) < 5*time.Second {
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
