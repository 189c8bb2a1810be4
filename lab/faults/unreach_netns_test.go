//go:build netns

package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/lab/netns"
)

// pathWatch records what can make a client's connect fail with "no route to
// host" while a test runs: every ICMP destination-unreachable the client
// receives (who sent it, about which address) and every neighbour entry
// that turns INCOMPLETE or FAILED in the client's and the gateway's
// namespaces. A failed request then names its cause instead of a bare
// EHOSTUNREACH (issue 33: TestNetnsDrainUnderLoad failed so, once, at load ~3).
type pathWatch struct {
	mu     sync.Mutex
	events []string
}

func (w *pathWatch) add(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) < 200 {
		w.events = append(w.events, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, a...))
	}
}

// Events returns what was recorded so far.
func (w *pathWatch) Events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// watchPath starts recording in client and gateway until the test ends.
func watchPath(t *testing.T, client, gateway *netns.NS) *pathWatch {
	t.Helper()
	w := &pathWatch{}
	// ICMP to the client: a raw socket sees a copy of every ICMP packet.
	pc, err := client.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatalf("icmp socket in %s: %v", client.Name, err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	// Closing the socket ends the reader; closing done ends the
	// neighbour subscriptions.
	t.Cleanup(func() { pc.Close(); close(done); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			// type 3 (destination unreachable), code, then the original
			// IP header from byte 8: its destination at 8+16.
			if n >= 8+20 && buf[0] == 3 {
				orig, _ := netip.AddrFromSlice(buf[8+16 : 8+20])
				w.add("client got ICMP unreachable code %d from %s about %s (proto %d)", buf[1], from.(*net.IPAddr).IP, orig, buf[8+9])
			}
		}
	}()

	for _, n := range []*netns.NS{client, gateway} {
		ch := make(chan netlink.NeighUpdate, 64)
		if err := netlink.NeighSubscribeAt(n.Handle(), ch, done); err != nil {
			t.Fatalf("neighbour events in %s: %v", n.Name, err)
		}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			for u := range ch {
				if u.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) != 0 {
					w.add("%s: neighbour %s on link %d is %s", name, u.IP, u.LinkIndex, neighState(u.State))
				}
			}
		}(n.Name)
	}
	return w
}

func neighState(s int) string {
	switch {
	case s&netlink.NUD_FAILED != 0:
		return "FAILED"
	case s&netlink.NUD_INCOMPLETE != 0:
		return "INCOMPLETE"
	}
	return fmt.Sprintf("state %#x", s)
}

// TestNetnsPathWatch: the watcher names both causes of "no route to host":
// a router that cannot resolve the next hop sends the client an ICMP host
// unreachable (recorded with its sender and the address), and the client's
// own neighbour entry for an address nobody answers turns FAILED.
func TestNetnsPathWatch(t *testing.T) {
	client, gw := netns.NewT(t, "elpwc"), netns.NewT(t, "elpwg")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netns.Veth(client, "eth0", gw, "c0"))
	must(client.AddAddr("eth0", netip.MustParsePrefix("192.0.2.2/24")))
	must(gw.AddAddr("c0", netip.MustParsePrefix("192.0.2.1/24")))
	// The gateway's other side: a link whose far end answers nothing.
	must(netns.Veth(gw, "b0", netns.NewT(t, "elpwb"), "eth0"))
	must(gw.AddAddr("b0", netip.MustParsePrefix("198.51.100.1/24")))
	must(gw.Sysctl("net.ipv4.ip_forward", "1"))
	must(client.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("192.0.2.1")))
	w := watchPath(t, client, gw)

	for _, dst := range []string{"198.51.100.99:80", "192.0.2.99:80"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := client.DialContext(ctx, "tcp", dst)
		cancel()
		if !errors.Is(err, syscall.EHOSTUNREACH) {
			t.Fatalf("dial %s: %v, want EHOSTUNREACH", dst, err)
		}
	}
	// The kernel reports the socket error before it sends the neighbour
	// notification: wait for the record itself (30 s bounds a hang).
	wants := []string{
		"client got ICMP unreachable code 1 from 192.0.2.1 about 198.51.100.99",
		gw.Name + ": neighbour 198.51.100.99 on link",
		client.Name + ": neighbour 192.0.2.99 on link",
		"is FAILED",
	}
	var ev string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ev = strings.Join(w.Events(), "\n")
		missing := false
		for _, want := range wants {
			missing = missing || !strings.Contains(ev, want)
		}
		if !missing {
			break
		}
	}
	t.Logf("recorded:\n%s", ev)
	for _, want := range wants {
		if !strings.Contains(ev, want) {
			t.Errorf("not recorded: %q", want)
		}
	}
}
