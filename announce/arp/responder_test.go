package arp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2test"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// written decodes the ARP packets c carries.
func written(c *l2test.Conn) []*arp.Packet {
	var ps []*arp.Packet
	for _, b := range c.Written() {
		var f ethernet.Frame
		if err := f.UnmarshalBinary(b); err != nil {
			panic(err)
		}
		p := new(arp.Packet)
		if err := p.UnmarshalBinary(f.Payload); err != nil {
			panic(err)
		}
		ps = append(ps, p)
	}
	return ps
}

var (
	gwMAC     = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	otherMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 3}
	clientIP  = netip.MustParseAddr("192.0.2.2")
	vip1      = netip.MustParseAddr("192.0.2.100")
	vip2      = netip.MustParseAddr("192.0.2.101")
)

func request(t testing.TB, from net.HardwareAddr, sender, target netip.Addr) []byte {
	p, err := arp.NewPacket(arp.OperationRequest, from, sender, ethernet.Broadcast, target)
	if err != nil {
		t.Fatal(err)
	}
	b, err := marshalFrame(p, ethernet.Broadcast)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestResponder(t *testing.T) (*Responder, *l2test.Conn) {
	c := l2test.NewConn()
	r, err := newResponder(Config{Interface: "test0", GARPCount: 1}, func(string) (packetConn, net.HardwareAddr, error) {
		return c, gwMAC, nil
	}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, c
}

func waitStats(t *testing.T, r *Responder, cond func(Stats) bool) Stats {
	t.Helper()
	return l2test.WaitFor(t, r.Stats, cond)
}

func TestResponderAnswersOnlyOwned(t *testing.T) {
	r, c := newTestResponder(t)
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	c.In <- request(t, clientMAC, clientIP, vip2) // not owned
	c.In <- request(t, clientMAC, clientIP, vip1) // owned
	waitStats(t, r, func(s Stats) bool { return s.Replies == 1 && s.Ignored == 1 })

	ps := written(c)
	// one GARP round (request + reply form) then one reply
	if len(ps) != 3 {
		t.Fatalf("wrote %d packets, want 3", len(ps))
	}
	rep := ps[2]
	if rep.Operation != arp.OperationReply || rep.SenderIP != vip1 || !bytes.Equal(rep.SenderHardwareAddr, gwMAC) ||
		rep.TargetIP != clientIP || !bytes.Equal(rep.TargetHardwareAddr, clientMAC) {
		t.Fatalf("reply %+v", rep)
	}

	// Released: silent from the moment SetOwned returns.
	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	c.In <- request(t, clientMAC, clientIP, vip1)
	waitStats(t, r, func(s Stats) bool { return s.Ignored == 2 })
	if got := len(written(c)); got != 3 {
		t.Fatalf("answered after release: %d packets", got)
	}
}

func TestResponderIgnoresSelfAndGratuitous(t *testing.T) {
	r, c := newTestResponder(t)
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	c.In <- request(t, gwMAC, clientIP, vip1)     // our own outgoing frame seen by the socket
	c.In <- request(t, otherMAC, vip1, vip1)      // another host's gratuitous ARP: a conflict, never answered
	c.In <- request(t, clientMAC, clientIP, vip1) // a real request
	s := waitStats(t, r, func(s Stats) bool { return s.Replies == 1 && s.Conflicts == 1 })
	if s.Replies != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestResponderGARPBurst(t *testing.T) {
	c := l2test.NewConn()
	r, err := newResponder(Config{Interface: "test0", GARPCount: 3, GARPInterval: 5 * time.Millisecond},
		func(string) (packetConn, net.HardwareAddr, error) { return c, gwMAC, nil }, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	// The first round is on the wire before SetOwned returns.
	if got := r.Stats().GARPs; got != 1 {
		t.Fatalf("GARPs right after SetOwned = %d, want 1", got)
	}
	waitStats(t, r, func(s Stats) bool { return s.GARPs == 3 })
	for i, p := range written(c) {
		if p.SenderIP != vip1 || p.TargetIP != vip1 || !bytes.Equal(p.SenderHardwareAddr, gwMAC) {
			t.Fatalf("garp %d: %+v", i, p)
		}
	}
	// A burst stops when the address is released.
	if err := r.SetOwned([]netip.Addr{vip2}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if got := r.Stats().GARPs; got != 4 {
		t.Fatalf("GARPs after release = %d, want 4 (burst cancelled)", got)
	}
}

func TestResponderRefusesIPv6(t *testing.T) {
	r, _ := newTestResponder(t)
	err := r.SetOwned([]netip.Addr{vip1, netip.MustParseAddr("2001:db8::1")})
	if err == nil {
		t.Fatal("IPv6 accepted")
	}
	if len(r.Owned()) != 0 {
		t.Fatalf("partial apply: %v", r.Owned())
	}
}

func TestResponderReopens(t *testing.T) {
	first, second := l2test.NewConn(), l2test.NewConn()
	var mu sync.Mutex
	opens := 0
	r, err := newResponder(Config{Interface: "test0", GARPCount: 1}, func(string) (packetConn, net.HardwareAddr, error) {
		mu.Lock()
		defer mu.Unlock()
		opens++
		if opens == 1 {
			return first, gwMAC, nil
		}
		return second, gwMAC, nil
	}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	first.Close() // the socket dies under the responder
	waitStats(t, r, func(s Stats) bool { return s.Reopens == 1 })
	second.In <- request(t, clientMAC, clientIP, vip1)
	waitStats(t, r, func(s Stats) bool { return s.Replies == 1 })
}

func TestParseFrameRejects(t *testing.T) {
	good := request(t, clientMAC, clientIP, vip1)
	if f, err := parseFrame(good); err != nil || f.kind != kindRequest || f.targetIP != vip1 {
		t.Fatalf("good request: %+v %v", f, err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:20],
		"ipv4 ethertype": func() []byte {
			b := bytes.Clone(good)
			b[12], b[13] = 0x08, 0x00
			return b
		}(),
		"ip length 16": func() []byte {
			b := bytes.Clone(good)
			b[14+5] = 16
			return b
		}(),
		"operation 7": func() []byte {
			b := bytes.Clone(good)
			b[14+7] = 7
			return b
		}(),
	} {
		if _, err := parseFrame(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseFrame: any bytes from the wire either parse into a consistent
// frame or are refused; never a panic.
func FuzzParseFrame(f *testing.F) {
	f.Add(request(f, clientMAC, clientIP, vip1))
	f.Add(request(f, otherMAC, vip1, vip1))
	gs, _ := garpFrames(gwMAC, vip1)
	for _, g := range gs {
		f.Add(g)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err != nil {
			if errors.Is(err, errNotARP) {
				return
			}
			return
		}
		if !fr.senderIP.Is4() || !fr.targetIP.Is4() || len(fr.senderHW) != 6 {
			t.Fatalf("inconsistent frame %+v", fr)
		}
		if fr.kind == kindRequest {
			if _, err := replyFrame(fr, gwMAC, fr.targetIP); err != nil {
				t.Fatalf("cannot answer a parsed request: %v", err)
			}
		}
	})
}

// TestWriteFuzzCorpus refreshes testdata/fuzz/FuzzParseFrame from the seeds
// above when EDGELB_WRITE_CORPUS=1 (the corpus is committed; this only
// regenerates it).
func TestWriteFuzzCorpus(t *testing.T) {
	gs, _ := garpFrames(gwMAC, vip1)
	l2test.WriteCorpus(t, "FuzzParseFrame", map[string][]byte{
		"request":    request(t, clientMAC, clientIP, vip1),
		"gratuitous": request(t, otherMAC, vip1, vip1),
		"garp-req":   gs[0],
		"garp-reply": gs[1],
		"truncated":  request(t, clientMAC, clientIP, vip1)[:30],
		"probe":      request(t, clientMAC, netip.IPv4Unspecified(), vip1),
	})
}
