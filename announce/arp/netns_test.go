//go:build netns

package arp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2test"
	"github.com/edgelb/edgelb/lab/netns"
)

type captured struct {
	at time.Time
	f  frame
}

// answers returns the ARP frames of the given kinds for vip (as sender) that
// c received since t0.
func answers(c *l2test.Capture, vip netip.Addr, t0 time.Time, kinds ...frameKind) []captured {
	var out []captured
	for _, r := range c.Since(t0) {
		if f, err := parseFrame(r.B); err == nil && f.senderIP == vip && slices.Contains(kinds, f.kind) {
			out = append(out, captured{r.At, f})
		}
	}
	return out
}

var replyRE = regexp.MustCompile(`reply from (\S+) \[([0-9A-Fa-f:]+)\]`)

// arping runs `arping -c count -I ifName vip` in ns and returns the MACs of the replies.
func arping(t *testing.T, ns *netns.NS, ifName string, vip netip.Addr, count int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := ns.Command(ctx, "arping", "-c", itoa(count), "-w", itoa(count+2), "-I", ifName, vip.String()).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("arping: %v: %s", err, out)
	}
	t.Logf("arping -c %d -I %s %s:\n%s", count, ifName, vip, strings.TrimSpace(string(out)))
	var macs []string
	for _, m := range replyRE.FindAllStringSubmatch(string(out), -1) {
		macs = append(macs, strings.ToLower(m[2]))
	}
	return macs
}

func itoa(i int) string { return strconv.Itoa(i) }

// lab is a gateway namespace and a client namespace on one veth pair.
type lab struct {
	gw, client *netns.NS
	gwMAC      net.HardwareAddr
}

func newLab(t *testing.T) *lab {
	t.Helper()
	netns.RequireRoot(t)
	if _, err := exec.LookPath("arping"); err != nil {
		t.Skip("arping not installed (lab/deps.sh netns)")
	}
	l := &lab{gw: netns.NewT(t, "elb-arpg"), client: netns.NewT(t, "elb-arpc")}
	if err := netns.Veth(l.gw, "gw0", l.client, "cl0"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns   *netns.NS
		link string
		addr string
	}{{l.gw, "gw0", "192.0.2.1/24"}, {l.client, "cl0", "192.0.2.2/24"}} {
		if err := s.ns.AddAddr(s.link, netip.MustParsePrefix(s.addr)); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if l.gwMAC, err = l.gw.MAC("gw0"); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *lab) responder(t *testing.T) *Responder {
	t.Helper()
	return l2test.Start(t, l.gw, func() (*Responder, error) {
		return New(Config{Interface: "gw0", GARPCount: 3, GARPInterval: 100 * time.Millisecond})
	})
}

func TestNetnsARPResponder(t *testing.T) {
	l := newLab(t)
	vip := netip.MustParseAddr("192.0.2.100")
	cap := l2test.Listen(t, l.client, "cl0", etherTypeARP, nil)
	r := l.responder(t)

	// Not owned yet: nothing answers (the kernel has no such address).
	if macs := arping(t, l.client, "cl0", vip, 2); len(macs) != 0 {
		t.Fatalf("replies before ownership: %v", macs)
	}

	t0 := time.Now()
	if err := r.SetOwned([]netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	// The whole burst: 3 rounds 100 ms apart, waited for as captured (a
	// busy machine delays the rounds and this capture's reader alike).
	var garps []captured
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if garps = answers(cap, vip, t0, kindGratuitous); len(garps) >= 3 || time.Now().After(end) {
			break
		}
	}
	if len(garps) < 3 {
		t.Fatalf("%d gratuitous ARP frames captured for %s in 10 s, want the burst's 3", len(garps), vip)
	}
	for _, g := range garps {
		if !bytes.Equal(g.f.senderHW, l.gwMAC) {
			t.Fatalf("gratuitous ARP from %s, gateway is %s", g.f.senderHW, l.gwMAC)
		}
	}
	t.Logf("gratuitous ARP captured in the client namespace: %d request-form frames from %s, first %.1f ms after SetOwned",
		len(garps), l.gwMAC, float64(garps[0].at.Sub(t0).Microseconds())/1000)

	macs := arping(t, l.client, "cl0", vip, 3)
	if len(macs) != 3 {
		t.Fatalf("arping: %d/3 replies", len(macs))
	}
	for _, m := range macs {
		if m != l.gwMAC.String() {
			t.Fatalf("reply MAC %s, gateway is %s", m, l.gwMAC)
		}
	}
	t.Logf("arping: 3/3 replies, all %s (the gateway's MAC)", l.gwMAC)

	// The client kernel's own resolution lands on the gateway too.
	if _, err := l.client.Exec(context.Background(), "ip", "neigh", "flush", "dev", "cl0"); err != nil {
		t.Fatal(err)
	}
	if err := sendUDP(l.client, vip); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ = l.client.Exec(context.Background(), "ip", "neigh", "show", vip.String(), "dev", "cl0")
		if strings.Contains(string(out), l.gwMAC.String()) || time.Now().After(end) {
			break
		}
	}
	if !strings.Contains(string(out), l.gwMAC.String()) {
		t.Fatalf("client neighbour entry %q, want %s", out, l.gwMAC)
	}
	t.Logf("client kernel resolution: %s", strings.TrimSpace(string(out)))

	// Released: silent.
	tRel := time.Now()
	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if macs := arping(t, l.client, "cl0", vip, 3); len(macs) != 0 {
		t.Fatalf("replies after release: %v", macs)
	}
	// Replies after the release are arping's to judge (it asked after
	// tRel): a reply to the client kernel's own request, sent before tRel,
	// can reach this capture's reader after it on a busy machine. A
	// gratuitous frame is the responder's own: its burst was whole seconds
	// before, so any after tRel is one sent after the release.
	if late := answers(cap, vip, tRel, kindGratuitous); len(late) != 0 {
		t.Fatalf("%d gratuitous ARP frames for %s after release", len(late), vip)
	}
	st := r.Stats()
	t.Logf("after release: arping 0/3 replies, 0 ARP frames for %s captured; responder stats %+v", vip, st)
}

// sendUDP makes the client kernel resolve vip (one datagram to the discard port).
func sendUDP(ns *netns.NS, vip netip.Addr) error {
	c, err := ns.DialContext(context.Background(), "udp", netip.AddrPortFrom(vip, 9).String())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("x"))
	return err
}

// TestNetnsARPKernelSilent: a VIP assigned to a local interface other than
// the uplink (the IPVS dataplane's edgelb0; here lo) is answered by the
// kernel on the uplink unless arp_ignore=1 — two gateways answering at once.
// That is why the IPVS dataplane sets arp_ignore=1 and hostcheck reports it
// (nftables VIPs are never local: a pool holding an own address is refused).
// With arp_ignore=1 only the responder speaks.
func TestNetnsARPKernelSilent(t *testing.T) {
	l := newLab(t)
	vip := netip.MustParseAddr("192.0.2.100")
	if err := l.gw.AddAddr("lo", netip.PrefixFrom(vip, 32)); err != nil {
		t.Fatal(err)
	}
	if macs := arping(t, l.client, "cl0", vip, 1); len(macs) != 1 {
		t.Fatalf("kernel did not answer with arp_ignore=0: %v", macs)
	}
	for _, k := range []string{"net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.gw0.arp_ignore"} {
		if err := l.gw.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	if macs := arping(t, l.client, "cl0", vip, 2); len(macs) != 0 {
		t.Fatalf("kernel answered with arp_ignore=1: %v", macs)
	}
	r := l.responder(t)
	if err := r.SetOwned([]netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	if macs := arping(t, l.client, "cl0", vip, 3); len(macs) != 3 {
		t.Fatalf("responder: %d/3", len(macs))
	}
	t.Log("arp_ignore=1: the kernel is silent for a VIP on lo, the responder answers 3/3")
}
