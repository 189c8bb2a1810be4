package l2resp

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce/internal/l2test"
)

// fakeProto is a protocol whose frames are address strings: Handle answers
// (writes the address back) when it is owned. It records what the core asked
// of it and checks the core's promise that an address is owned whenever it is
// announced.
type fakeProto struct {
	links     chan *l2test.Conn // what Open returns, in turn
	claimErr  netip.Addr        // Claim fails for this one
	mu        sync.Mutex
	calls     []string
	violation string
}

func (p *fakeProto) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, s)
}

func (p *fakeProto) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *fakeProto) Open(string) (*l2test.Conn, net.HardwareAddr, error) {
	select {
	case c := <-p.links:
		return c, net.HardwareAddr{2, 0, 0, 0, 0, 1}, nil
	default:
		return nil, nil, errors.New("no link")
	}
}

func (p *fakeProto) Parse(b []byte) (netip.Addr, error) { return netip.ParseAddr(string(b)) }

func (p *fakeProto) Handle(s State[*l2test.Conn], a netip.Addr) {
	if !s.Owns(a) {
		s.Count.Ignored++
		return
	}
	s.Link.WriteTo([]byte("reply "+a.String()), nil)
	s.Count.Replies++
}

func (p *fakeProto) Announce(s State[*l2test.Conn], a netip.Addr) {
	if !s.Owns(a) {
		p.mu.Lock()
		p.violation = "announced " + a.String() + " while not owned"
		p.mu.Unlock()
	}
	if s.Link == nil {
		return
	}
	s.Link.WriteTo([]byte("announce "+a.String()), nil)
	s.Count.Announced++
}

func (p *fakeProto) Claim(_ State[*l2test.Conn], a netip.Addr) error {
	p.record("claim " + a.String())
	if a == p.claimErr {
		return errors.New("claim failed")
	}
	return nil
}

func (p *fakeProto) Release(_ State[*l2test.Conn], a netip.Addr) error {
	p.record("release " + a.String())
	return nil
}

func (p *fakeProto) Reopened(State[*l2test.Conn]) { p.record("reopened") }

var (
	a1 = netip.MustParseAddr("192.0.2.1")
	a2 = netip.MustParseAddr("192.0.2.2")
)

func start(t *testing.T, count int, interval time.Duration, links ...*l2test.Conn) (*Core[*l2test.Conn, netip.Addr], *fakeProto) {
	t.Helper()
	p := &fakeProto{links: make(chan *l2test.Conn, len(links))}
	for _, l := range links {
		p.links <- l
	}
	c, err := Start(Config{Name: "test", Interface: "test0", Count: count, Interval: interval, Retry: time.Millisecond,
		ReadBuffer: 64, ReadFailed: "read", ReopenFailed: "reopen", Logger: slog.New(slog.DiscardHandler)}, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.violation != "" {
			t.Error(p.violation)
		}
	})
	return c, p
}

func TestStartFails(t *testing.T) {
	p := &fakeProto{links: make(chan *l2test.Conn)}
	if _, err := Start(Config{Name: "test"}, p); err == nil || err.Error() != `test: field "interface" is empty` {
		t.Fatalf("no interface: %v", err)
	}
	if _, err := Start(Config{Name: "test", Interface: "test0"}, p); err == nil || err.Error() != "test: no link" {
		t.Fatalf("no link: %v", err)
	}
}

func TestSetOwnedClaimsAndReleases(t *testing.T) {
	c, p := start(t, 1, time.Hour, l2test.NewConn())
	if err := c.SetOwned([]netip.Addr{a2, a1, a2}); err != nil {
		t.Fatal(err)
	}
	if got := c.Owned(); !slices.Equal(got, []netip.Addr{a1, a2}) {
		t.Fatalf("owned %v", got)
	}
	if n := c.Counters().Announced; n != 2 {
		t.Fatalf("announced %d before SetOwned returned, want 2", n)
	}
	if err := c.SetOwned([]netip.Addr{a2}); err != nil {
		t.Fatal(err)
	}
	calls := p.Calls()
	slices.Sort(calls[:2]) // the new set is claimed in map order
	if want := []string{"claim 192.0.2.1", "claim 192.0.2.2", "release 192.0.2.1"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

func TestFailedClaimStillOwned(t *testing.T) {
	c, p := start(t, 1, time.Hour, l2test.NewConn())
	p.claimErr = a1
	if err := c.SetOwned([]netip.Addr{a1}); err == nil {
		t.Fatal("claim error not reported")
	}
	if got := c.Owned(); !slices.Equal(got, []netip.Addr{a1}) {
		t.Fatalf("owned %v", got)
	}
}

func TestBurstOnlyWhileOwned(t *testing.T) {
	c, _ := start(t, 3, 2*time.Millisecond, l2test.NewConn())
	if err := c.SetOwned([]netip.Addr{a1}); err != nil {
		t.Fatal(err)
	}
	l2test.WaitFor(t, c.Counters, func(n Counters) bool { return n.Announced == 3 })
	// Claim and release over and over: the fake flags any round announced for
	// an address that was not owned at that moment.
	for range 50 {
		if err := c.SetOwned([]netip.Addr{a2}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetOwned(nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // the cancelled bursts' ticks come and go
}

func TestReclaimCancelsOldBurst(t *testing.T) {
	c, _ := start(t, 2, 20*time.Millisecond, l2test.NewConn())
	for _, set := range [][]netip.Addr{{a1}, nil, {a1}} {
		if err := c.SetOwned(set); err != nil {
			t.Fatal(err)
		}
	}
	// Two first rounds and the second round of the new burst: wait for
	// that round (on a busy machine its tick can come long after 20 ms).
	l2test.WaitFor(t, c.Counters, func(n Counters) bool { return n.Announced >= 3 })
	// The old burst's second round would make 4. Its ticker started before
	// the new one's, so it has normally fired by now; a few intervals more
	// give it room. A correct core never exceeds 3, so this cannot fail by
	// chance (a slow machine can only hide the bug, never invent it).
	time.Sleep(100 * time.Millisecond)
	if n := c.Counters().Announced; n != 3 {
		t.Fatalf("announced %d, want 3", n)
	}
}

func TestHandleSeesOwned(t *testing.T) {
	link := l2test.NewConn()
	c, _ := start(t, 1, time.Hour, link)
	if err := c.SetOwned([]netip.Addr{a1}); err != nil {
		t.Fatal(err)
	}
	link.In <- []byte("not an address") // dropped by Parse
	link.In <- []byte(a2.String())
	link.In <- []byte(a1.String())
	n := l2test.WaitFor(t, c.Counters, func(n Counters) bool { return n.Replies == 1 && n.Ignored == 1 })
	if n.Ignored != 1 {
		t.Fatalf("counters %+v", n)
	}
	if w := link.Written(); string(w[len(w)-1]) != "reply 192.0.2.1" {
		t.Fatalf("wrote %q", w)
	}
}

func TestReopenAnnouncesAgain(t *testing.T) {
	first, second := l2test.NewConn(), l2test.NewConn()
	c, p := start(t, 1, time.Hour, first, second)
	if err := c.SetOwned([]netip.Addr{a1}); err != nil {
		t.Fatal(err)
	}
	first.Close() // the socket dies under the core
	l2test.WaitFor(t, c.Counters, func(n Counters) bool { return n.Reopens == 1 && n.Announced == 2 })
	if w := second.Written(); len(w) != 1 || string(w[0]) != "announce 192.0.2.1" {
		t.Fatalf("new link got %q", w)
	}
	if calls := p.Calls(); calls[len(calls)-1] != "reopened" {
		t.Fatalf("calls %q", calls)
	}
	second.In <- []byte(a1.String())
	l2test.WaitFor(t, c.Counters, func(n Counters) bool { return n.Replies == 1 })
}

func TestCloseTwiceThenRefuse(t *testing.T) {
	link := l2test.NewConn()
	c, _ := start(t, 3, time.Hour, link)
	if err := c.SetOwned([]netip.Addr{a1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err := c.SetOwned([]netip.Addr{a1})
	if !errors.Is(err, ErrClosed) || err.Error() != "test: responder closed" {
		t.Fatalf("SetOwned after Close: %v", err)
	}
	if len(c.Owned()) != 0 {
		t.Fatalf("owned after Close: %v", c.Owned())
	}
	if _, _, err := link.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatal("link left open")
	}
}

func TestEthernetInterfaceRefuses(t *testing.T) {
	// lo has no Ethernet address in any namespace.
	if _, err := EthernetInterface("lo"); err == nil {
		t.Fatal("lo accepted")
	}
	if _, err := EthernetInterface("elb-missing0"); err == nil {
		t.Fatal("missing interface accepted")
	}
}
