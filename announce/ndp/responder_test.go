package ndp

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2test"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// written parses what the responder wrote to c; each must be a valid ND message.
func written(t *testing.T, c *l2test.Conn) []message {
	var ms []message
	for _, b := range c.Written() {
		m, err := parseMessage(b)
		if err != nil {
			t.Fatalf("responder wrote an invalid frame: %v", err)
		}
		ms = append(ms, m)
	}
	return ms
}

type fakeGroups struct {
	mu     sync.Mutex
	joined map[netip.Addr]bool
}

func (g *fakeGroups) JoinGroup(a netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joined[a] = true
	return nil
}
func (g *fakeGroups) LeaveGroup(a netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.joined, a)
	return nil
}
func (g *fakeGroups) Close() error { return nil }
func (g *fakeGroups) has(a netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joined[a]
}

var (
	gwMAC     = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	otherMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 3}
	clientIP  = netip.MustParseAddr("2001:db8::2")
	vip1      = netip.MustParseAddr("2001:db8::100")
	vip2      = netip.MustParseAddr("2001:db8:1::100") // same solicited-node group as vip1
	vip3      = netip.MustParseAddr("2001:db8::200")
)

// solicitFrame builds a neighbour solicitation as a client kernel sends it.
func solicitFrame(t testing.TB, from net.HardwareAddr, src, dst, target netip.Addr, hop byte) []byte {
	ns := &ndp.NeighborSolicitation{TargetAddress: target}
	if !src.IsUnspecified() {
		ns.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: from}}
	}
	body, err := ndp.MarshalMessageChecksum(ns, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	ip := make([]byte, ipv6HdrLen)
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(body)))
	ip[6], ip[7] = protoICMP6, hop
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	dmac := net.HardwareAddr{0x33, 0x33, d[12], d[13], d[14], d[15]}
	f := ethernet.Frame{Destination: dmac, Source: from, EtherType: ethernet.EtherTypeIPv6, Payload: append(ip, body...)}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func snm(a netip.Addr) netip.Addr { g, _ := ndp.SolicitedNodeMulticast(a); return g }

func newTestResponder(t *testing.T, count int) (*Responder, *l2test.Conn, *fakeGroups) {
	fr, gr := l2test.NewConn(), &fakeGroups{joined: map[netip.Addr]bool{}}
	r, err := newResponder(Config{Interface: "test0", NACount: count, NAInterval: 5 * time.Millisecond},
		func(string) (sockets, net.HardwareAddr, error) { return sockets{frames: fr, groups: gr}, gwMAC, nil }, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, fr, gr
}

func waitStats(t *testing.T, r *Responder, cond func(Stats) bool) Stats {
	t.Helper()
	return l2test.WaitFor(t, r.Stats, cond)
}

func TestResponderAnswersOnlyOwned(t *testing.T) {
	r, fr, gr := newTestResponder(t, 1)
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	if !gr.has(snm(vip1)) {
		t.Fatalf("solicited-node group %s not joined", snm(vip1))
	}
	fr.In <- solicitFrame(t, clientMAC, clientIP, snm(vip3), vip3, 255) // not owned
	fr.In <- solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 64)  // routed: hop limit not 255
	fr.In <- solicitFrame(t, gwMAC, clientIP, snm(vip1), vip1, 255)     // our own frame
	fr.In <- solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 255) // multicast NS
	fr.In <- solicitFrame(t, clientMAC, clientIP, vip1, vip1, 255)      // unicast NUD probe
	waitStats(t, r, func(s Stats) bool { return s.Replies == 2 && s.Ignored == 1 })

	ms := written(t, fr)
	if len(ms) != 3 {
		t.Fatalf("wrote %d messages, want 3 (1 unsolicited + 2 answers)", len(ms))
	}
	un := ms[0]
	if un.kind != kindAdvert || un.dst != allNodes || un.target != vip1 || !bytes.Equal(un.lla, gwMAC) {
		t.Fatalf("unsolicited %+v", un)
	}
	for _, a := range ms[1:] {
		if a.kind != kindAdvert || a.dst != clientIP || a.src != vip1 || a.target != vip1 || !bytes.Equal(a.lla, gwMAC) {
			t.Fatalf("answer %+v", a)
		}
	}
	f := fr.Written()[1]
	if !bytes.Equal(f[0:6], clientMAC) {
		t.Fatalf("answer sent to %s, want %s", net.HardwareAddr(f[0:6]), clientMAC)
	}
	flags := f[ethHdrLen+ipv6HdrLen+4]
	if flags&0x60 != 0x60 {
		t.Fatalf("answer flags %#x: want Solicited and Override", flags)
	}

	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if gr.has(snm(vip1)) {
		t.Fatal("group still joined after release")
	}
	fr.In <- solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 255)
	waitStats(t, r, func(s Stats) bool { return s.Ignored == 2 })
	if got := len(written(t, fr)); got != 3 {
		t.Fatalf("answered after release: %d", got)
	}
}

func TestResponderDADDefence(t *testing.T) {
	r, fr, _ := newTestResponder(t, 1)
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	fr.In <- solicitFrame(t, otherMAC, netip.IPv6Unspecified(), snm(vip1), vip1, 255)
	waitStats(t, r, func(s Stats) bool { return s.Replies == 1 })
	ms := written(t, fr)
	if a := ms[len(ms)-1]; a.dst != allNodes {
		t.Fatalf("DAD answer to %s, want ff02::1", a.dst)
	}
}

func TestResponderGroupsRefcounted(t *testing.T) {
	r, _, gr := newTestResponder(t, 1)
	if snm(vip1) != snm(vip2) {
		t.Fatal("test needs two VIPs sharing a solicited-node group")
	}
	if err := r.SetOwned([]netip.Addr{vip1, vip2}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetOwned([]netip.Addr{vip2}); err != nil {
		t.Fatal(err)
	}
	if !gr.has(snm(vip2)) {
		t.Fatal("group left while vip2 still owned")
	}
	if err := r.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if gr.has(snm(vip2)) {
		t.Fatal("group kept after all released")
	}
}

func TestResponderUnsolicitedBurstAndConflict(t *testing.T) {
	r, fr, _ := newTestResponder(t, 3)
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	if got := r.Stats().Unsolicited; got != 1 {
		t.Fatalf("unsolicited right after SetOwned = %d", got)
	}
	waitStats(t, r, func(s Stats) bool { return s.Unsolicited == 3 })
	other, err := unsolicitedFrame(otherMAC, vip1)
	if err != nil {
		t.Fatal(err)
	}
	fr.In <- other
	waitStats(t, r, func(s Stats) bool { return s.Conflicts == 1 })
	if err := r.SetOwned([]netip.Addr{netip.MustParseAddr("192.0.2.1")}); err == nil {
		t.Fatal("IPv4 accepted")
	}
}

// TestResponderReopenRejoins: after the sockets die, the new group socket
// joins the owned VIPs' groups again and the VIPs are announced again.
func TestResponderReopenRejoins(t *testing.T) {
	socks := make(chan sockets, 2)
	first, second := l2test.NewConn(), l2test.NewConn()
	gr2 := &fakeGroups{joined: map[netip.Addr]bool{}}
	socks <- sockets{frames: first, groups: &fakeGroups{joined: map[netip.Addr]bool{}}}
	socks <- sockets{frames: second, groups: gr2}
	r, err := newResponder(Config{Interface: "test0", NACount: 1},
		func(string) (sockets, net.HardwareAddr, error) { return <-socks, gwMAC, nil }, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SetOwned([]netip.Addr{vip1}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	waitStats(t, r, func(s Stats) bool { return s.Reopens == 1 && s.Unsolicited == 2 })
	if !gr2.has(snm(vip1)) {
		t.Fatal("group not joined on the new socket")
	}
	if ms := written(t, second); len(ms) != 1 || ms[0].target != vip1 {
		t.Fatalf("new socket carried %+v", ms)
	}
}

func TestChecksumDetectsCorruption(t *testing.T) {
	b := solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 255)
	if _, err := parseMessage(b); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if _, err := parseMessage(b); err == nil {
		t.Fatal("corrupted solicitation accepted")
	}
}

func TestFilterAssembles(t *testing.T) {
	if _, err := ndFilter(); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseMessage: any frame either parses into a consistent message or is
// refused; a parsed solicitation can always be answered.
func FuzzParseMessage(f *testing.F) {
	for _, s := range corpusSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			return
		}
		if !m.target.Is6() || m.target.IsMulticast() {
			t.Fatalf("bad target %s", m.target)
		}
		if m.kind == kindSolicit {
			out, err := answerFrame(m, gwMAC, m.target)
			if err != nil {
				t.Fatalf("cannot answer: %v", err)
			}
			if _, err := parseMessage(out); err != nil {
				t.Fatalf("answer does not parse: %v", err)
			}
		}
	})
}

func corpusSeeds(t testing.TB) map[string][]byte {
	un, _ := unsolicitedFrame(gwMAC, vip1)
	return map[string][]byte{
		"ns-multicast": solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 255),
		"ns-unicast":   solicitFrame(t, clientMAC, clientIP, vip1, vip1, 255),
		"ns-dad":       solicitFrame(t, clientMAC, netip.IPv6Unspecified(), snm(vip1), vip1, 255),
		"na":           un,
		"truncated":    solicitFrame(t, clientMAC, clientIP, snm(vip1), vip1, 255)[:60],
	}
}

func TestWriteFuzzCorpus(t *testing.T) {
	l2test.WriteCorpus(t, "FuzzParseMessage", corpusSeeds(t))
}
