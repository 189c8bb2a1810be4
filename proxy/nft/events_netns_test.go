//go:build netns

package nft

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsSyncEvents: with Options.SyncEvents, a connection through a VIP
// sends conntrack listeners (conntrackd, `conntrack -E`) one UPDATE once
// assured (established) instead of NEW and an UPDATE for every TCP state
// change (and DESTROY at its end, after TIME_WAIT: not waited for here).
func TestNetnsSyncEvents(t *testing.T) {
	const conns = 5
	vip := netip.MustParseAddr("203.0.113.10")
	for _, c := range []struct {
		sync        bool
		news        int // NEW events per connection
		min, max    int // UPDATE events per connection until TIME_WAIT
		established bool
	}{{false, 1, 3, 8, false}, {true, 0, 1, 1, true}} {
		t.Run(fmt.Sprintf("syncEvents=%v", c.sync), func(t *testing.T) {
			topo := conformance.NewTopology(t, "nfev")
			d, err := New(Options{NetNS: int(topo.Gateway.Handle()), SyncEvents: c.sync})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			ctx := context.Background()
			svc := proxy.Service{Name: "web", VIP: vip, Port: 80, Protocol: proxy.TCP, Method: proxy.NAT,
				Backends: []proxy.Backend{{Addr: topo.Backend4(0, conformance.HTTPPort), Weight: 1}}}
			if err := d.Apply(ctx, proxy.Config{Services: []proxy.Service{svc}}); err != nil {
				t.Fatal(err)
			}
			// The rule reads back as written: a full read-back repairs nothing.
			before := d.Stats()
			d.clean.Forget()
			if err := d.Resync(ctx); err != nil {
				t.Fatal(err)
			}
			if after := d.Stats(); after.Messages != before.Messages || after.Reads != before.Reads+1 {
				t.Fatalf("a full read-back rewrote the table: %+v -> %+v", before, after)
			}
			events := watchEvents(t, topo.Gateway, vip)
			for range conns {
				if r, err := topo.GetHTTP(ctx, netip.Addr{}, netip.AddrPortFrom(vip, 80), 2*time.Second); err != nil || r.Backend != "be1" {
					t.Fatalf("GET via the VIP: %+v %v", r, err)
				}
			}
			// Every connection is in TIME_WAIT once its client closed; its
			// last state change before then has been sent.
			var got []string
			deadline := time.Now().Add(10 * time.Second)
			for {
				got = events()
				if c.sync && countPrefix(got, "[UPDATE]") >= conns || !c.sync && strings.Count(strings.Join(got, "\n"), "TIME_WAIT") >= conns {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("events after %d connections:\n%s", conns, strings.Join(got, "\n"))
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // anything late would show now
			got = events()
			news, updates := countPrefix(got, "[NEW]"), countPrefix(got, "[UPDATE]")
			t.Logf("MEASURED conntrack events syncEvents=%v connections=%d new=%d update=%d", c.sync, conns, news, updates)
			if news != c.news*conns || updates < c.min*conns || updates > c.max*conns {
				t.Fatalf("%d NEW and %d UPDATE events for %d connections, want %d and %d..%d:\n%s",
					news, updates, conns, c.news*conns, c.min*conns, c.max*conns, strings.Join(got, "\n"))
			}
			if c.established {
				for _, l := range got {
					if strings.HasPrefix(l, "[UPDATE]") && (!strings.Contains(l, "ESTABLISHED") || !strings.Contains(l, "[ASSURED]")) {
						t.Fatalf("the one update is not the established, assured state: %s", l)
					}
				}
			}
		})
	}
}

// watchEvents runs `conntrack -E` for TCP to dst in ns until the test ends
// and returns a function giving the event lines so far.
func watchEvents(t *testing.T, ns *netns.NS, dst netip.Addr) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := ns.Command(ctx, "conntrack", "-E", "-p", "tcp", "-d", dst.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, strings.TrimSpace(sc.Text()))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); cmd.Wait(); <-done })
	// Subscribed once a probe entry's event shows (conntrack -E may not
	// listen yet when a probe goes in: probe again). Probes (destination
	// port 1) are left out of what the function returns.
	isProbe := func(l string) bool { return strings.Contains(l, " dport=1 ") }
	for i := 1; ; i++ {
		if out, err := ns.Exec(context.Background(), "conntrack", "-I", "-p", "tcp", "-s", "192.0.2.99", "-d", dst.String(),
			"--sport", fmt.Sprint(i), "--dport", "1", "--state", "ESTABLISHED", "-t", "60", "-u", "SEEN_REPLY"); err != nil {
			t.Fatalf("probe: %v %s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		seen := slices.ContainsFunc(lines, isProbe)
		mu.Unlock()
		if seen {
			break
		}
		if i == 500 {
			t.Fatal("conntrack -E showed no event of 500 probe entries")
		}
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range lines {
			if !isProbe(l) {
				out = append(out, l)
			}
		}
		return out
	}
}

func countPrefix(lines []string, p string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			n++
		}
	}
	return n
}
