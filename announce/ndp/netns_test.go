//go:build netns

package ndp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2test"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/mdlayher/packet"
)

// client is a raw IPv6 packet socket in the client namespace: it sends
// solicitations and records every NS/NA it sees (no ndisc6 needed).
type client struct{ *l2test.Capture }

type seenMsg struct {
	at    time.Time
	m     message
	flags byte
}

func newClient(t *testing.T, ns *netns.NS, ifName string) client {
	t.Helper()
	f, err := ndFilter()
	if err != nil {
		t.Fatal(err)
	}
	return client{l2test.Listen(t, ns, ifName, etherTypeIPv6, f)}
}

// adverts returns the advertisements for target received since t0.
func (c client) adverts(target netip.Addr, t0 time.Time) []seenMsg {
	var out []seenMsg
	for _, r := range c.Since(t0) {
		m, err := parseMessage(r.B)
		if err == nil && m.kind == kindAdvert && m.target == target && !bytes.Equal(m.ethSrc, c.MAC) {
			out = append(out, seenMsg{r.At, m, r.B[ethHdrLen+ipv6HdrLen+4]})
		}
	}
	return out
}

// solicit sends n solicitations for target (multicast to its solicited-node
// group, or unicast to dstMAC/target when dstMAC is set) 100 ms apart, then
// returns the answers captured once n have come, or 5 s after the last.
func (c client) solicit(t *testing.T, src, target netip.Addr, dstMAC net.HardwareAddr, n int) []seenMsg {
	t.Helper()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		var b []byte
		if dstMAC == nil {
			b = solicitFrame(t, c.MAC, src, snm(target), target, 255)
		} else {
			b = solicitFrame(t, c.MAC, src, target, target, 255)
			copy(b[0:6], dstMAC)
		}
		if _, err := c.Conn.WriteTo(b, &packet.Addr{HardwareAddr: net.HardwareAddr(b[0:6])}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Answers are counted as captured: wait for all n (up to 5 s — a busy
	// machine delays the responder and this capture's reader), so where
	// none may come the window is 5 s too.
	got := c.adverts(target, t0)
	for end := time.Now().Add(5 * time.Second); len(got) < n && time.Now().Before(end); got = c.adverts(target, t0) {
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

func TestNetnsNDPResponder(t *testing.T) {
	netns.RequireRoot(t)
	gw, cl := netns.NewT(t, "elb-ndpg"), netns.NewT(t, "elb-ndpc")
	for _, ns := range []*netns.NS{gw, cl} {
		for _, k := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
			if err := ns.Sysctl(k, "0"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := netns.Veth(gw, "gw0", cl, "cl0"); err != nil {
		t.Fatal(err)
	}
	clientIP := netip.MustParseAddr("2001:db8::2")
	// The gateway gets no global IPv6 address at all: the responder needs none.
	if err := cl.AddAddr("cl0", netip.PrefixFrom(clientIP, 64)); err != nil {
		t.Fatal(err)
	}
	gwMAC, err := gw.MAC("gw0")
	if err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr("2001:db8::100")
	c := newClient(t, cl, "cl0")

	r := l2test.Start(t, gw, func() (*Responder, error) {
		return New(Config{Interface: "gw0", NACount: 3, NAInterval: 100 * time.Millisecond})
	})

	if got := c.solicit(t, clientIP, vip, nil, 2); len(got) != 0 {
		t.Fatalf("answers before ownership: %d", len(got))
	}

	t0 := time.Now()
	if err := r.SetOwned([]netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	// The whole burst (3, 100 ms apart), waited for as captured.
	var un []seenMsg
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if un = c.adverts(vip, t0); len(un) >= 3 || time.Now().After(end) {
			break
		}
	}
	if len(un) < 3 {
		t.Fatalf("%d unsolicited neighbour advertisements captured in 10 s, want the burst's 3", len(un))
	}
	for _, s := range un {
		if !bytes.Equal(s.m.lla, gwMAC) || s.m.dst != allNodes || s.flags&0x20 == 0 || s.flags&0x40 != 0 {
			t.Fatalf("unsolicited NA %+v flags %#x", s.m, s.flags)
		}
	}
	t.Logf("unsolicited NA captured in the client namespace: %d to ff02::1 with Override, target %s at %s, first %.1f ms after SetOwned",
		len(un), vip, gwMAC, float64(un[0].at.Sub(t0).Microseconds())/1000)

	ans := c.solicit(t, clientIP, vip, nil, 3)
	if len(ans) != 3 {
		t.Fatalf("multicast solicitations: %d/3 answers", len(ans))
	}
	for _, s := range ans {
		if !bytes.Equal(s.m.lla, gwMAC) || s.m.dst != clientIP || s.flags&0x60 != 0x60 {
			t.Fatalf("answer %+v flags %#x", s.m, s.flags)
		}
	}
	t.Logf("Go solicitations to %s: 3/3 solicited+override advertisements, target %s at %s", snm(vip), vip, gwMAC)

	// Unicast NUD probe (dst = the VIP itself): the kernel would never hand
	// this to an ICMPv6 socket since the VIP is not local; the packet socket sees it.
	if ans := c.solicit(t, clientIP, vip, gwMAC, 3); len(ans) != 3 {
		t.Fatalf("unicast solicitations: %d/3 answers", len(ans))
	}
	t.Log("unicast (NUD) solicitations to the VIP: 3/3 answered")

	// The client kernel resolves the VIP to the gateway (like ping6 would).
	conn, err := cl.DialContext(context.Background(), "udp", netip.AddrPortFrom(vip, 9).String())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("x"))
	conn.Close()
	var out []byte
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ = cl.Exec(context.Background(), "ip", "-6", "neigh", "show", vip.String(), "dev", "cl0")
		if strings.Contains(string(out), gwMAC.String()) || time.Now().After(end) {
			break
		}
	}
	if !strings.Contains(string(out), gwMAC.String()) {
		t.Fatalf("client neighbour entry %q, want %s", out, gwMAC)
	}
	t.Logf("client kernel: ip -6 neigh: %s", strings.TrimSpace(string(out)))

	tRel := time.Now()
	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if ans := c.solicit(t, clientIP, vip, nil, 3); len(ans) != 0 {
		t.Fatalf("answers after release: %d", len(ans))
	}
	// Solicited answers after the release are the solicitations' to judge
	// (sent after tRel); one to the client kernel's own solicitation, sent
	// before tRel, can reach this capture's reader after it on a busy
	// machine. An unsolicited one is the responder's own: its burst was
	// seconds before, so any after tRel was sent after the release.
	var late []seenMsg
	for _, a := range c.adverts(vip, tRel) {
		if a.flags&0x40 == 0 {
			late = append(late, a)
		}
	}
	if len(late) != 0 {
		t.Fatalf("%d unsolicited advertisements after release", len(late))
	}
	t.Logf("after release: 0/3 answers, 0 advertisements for %s; stats %+v", vip, r.Stats())
}
