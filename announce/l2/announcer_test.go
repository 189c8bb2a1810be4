package l2

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/ports"
)

// These tests run real memberlist clusters on 127.0.0.1 (no root, no
// namespaces) with fake responders that log every claim and release with
// its time, so ownership and "never two at once" are checked exactly.

// freePort returns a port free for both UDP and TCP on 127.0.0.1, below the
// ephemeral range (lab/ports).
func freePort(t *testing.T) uint16 { return uint16(ports.MustFree(t)) }

type cluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[string]*tnode
	ports map[string]uint16
	// every responder ever started, for the overlap check
	history []*FakeResponder
	owners  map[*FakeResponder]string
	// pushPull, if set, is memberlist's full state sync interval for nodes
	// started from then on.
	pushPull time.Duration
}

type tnode struct {
	name     string
	a        *Announcer
	arp, ndp *FakeResponder
	up       *FakeUplink
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, nodes: map[string]*tnode{}, ports: map[string]uint16{}, owners: map[*FakeResponder]string{}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.a.Close(false)
		}
	})
	return c
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// testLog logs to stderr with EDGELB_TEST_LOG=1 (debugging a failure).
func testLog(name string) *slog.Logger {
	if os.Getenv("EDGELB_TEST_LOG") != "1" {
		return quietLog
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
}

func (c *cluster) start(name string) *tnode {
	c.t.Helper()
	if _, ok := c.ports[name]; !ok {
		c.ports[name] = freePort(c.t)
	}
	var join []netip.AddrPort
	for n, p := range c.ports {
		if n != name {
			join = append(join, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p))
		}
	}
	n := &tnode{name: name, arp: NewFakeResponder(), ndp: NewFakeResponder(), up: NewFakeUplink(true)}
	a, err := New(Config{Interface: "lo", ARP: n.arp, NDP: n.ndp, Uplink: n.up, Logger: testLog(name),
		Members: &Members{Name: name, Bind: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), c.ports[name]),
			Join: join, SettleTime: 300 * time.Millisecond, StateWait: time.Second,
			// Logic, not timing, is under test here, often on a machine
			// busy compiling: a stall-tolerant tuning keeps memberlist from
			// declaring a live (but starved) node dead, which would be
			// a real, expected split brain. The failover suite uses the
			// sub-second defaults.
			Tuning: Tuning{ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond, SuspicionMult: 3,
				PushPullInterval: c.pushPull}}})
	if err != nil {
		c.t.Fatal(err)
	}
	n.a = a
	c.mu.Lock()
	c.nodes[name] = n
	c.history = append(c.history, n.arp, n.ndp)
	c.owners[n.arp], c.owners[n.ndp] = name, name
	c.mu.Unlock()
	return n
}

// kill stops a node like kill -9 would for its peers: no leave, no release message.
func (c *cluster) kill(name string) {
	c.mu.Lock()
	n := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	n.a.Close(false)
}

func (c *cluster) setVIPs(vips []netip.Addr) {
	var vs []announce.VIP
	for _, v := range vips {
		vs = append(vs, announce.VIP{Addr: v})
	}
	for _, n := range c.nodes {
		if err := n.a.SetVIPs(context.Background(), vs); err != nil {
			c.t.Fatal(err)
		}
	}
}

// ownership maps each VIP to the nodes answering for it now.
func (c *cluster) ownership() map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, n := range c.nodes {
		for _, a := range append(n.arp.Owned(), n.ndp.Owned()...) {
			out[a] = append(out[a], name)
		}
	}
	return out
}

// waitOwners waits until every VIP is answered by exactly its rendezvous
// owner among names, and returns how long that took.
func (c *cluster) waitOwners(vips []netip.Addr, names []string, timeout time.Duration) time.Duration {
	c.t.Helper()
	t0 := time.Now()
	for {
		own := c.ownership()
		bad := ""
		for _, v := range vips {
			if want := ownerOf(v, names); !slices.Equal(own[v], []string{want}) {
				bad = fmt.Sprintf("%s answered by %v, want [%s]", v, own[v], want)
				break
			}
		}
		if bad == "" {
			return time.Since(t0)
		}
		if time.Since(t0) > timeout {
			c.t.Fatalf("not converged after %s: %s", timeout, bad)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// overlaps checks the whole history: for each VIP, the intervals during which
// some responder answered never intersect across nodes.
func (c *cluster) overlaps() []string {
	type span struct {
		who        string
		start, end time.Time
	}
	spans := map[netip.Addr][]span{}
	c.mu.Lock()
	for _, r := range c.history {
		open := map[netip.Addr]time.Time{}
		for _, e := range r.Events() {
			if e.Owned {
				open[e.Addr] = e.At
			} else if s, ok := open[e.Addr]; ok {
				spans[e.Addr] = append(spans[e.Addr], span{c.owners[r], s, e.At})
				delete(open, e.Addr)
			}
		}
		for a, s := range open {
			spans[a] = append(spans[a], span{c.owners[r], s, time.Now().Add(time.Hour)})
		}
	}
	c.mu.Unlock()
	var bad []string
	for vip, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		last := ss[0] // the span reaching furthest so far
		for _, s := range ss[1:] {
			if s.start.Before(last.end) && s.who != last.who {
				bad = append(bad, fmt.Sprintf("%s: %s from %s while %s until %s", vip, s.who,
					s.start.Format("15:04:05.000"), last.who, last.end.Format("15:04:05.000")))
			}
			if s.end.After(last.end) {
				last = s
			}
		}
	}
	return bad
}

func testVIPs() []netip.Addr {
	vips := vipRange(10)
	return append(vips, netip.MustParseAddr("2001:db8::100"), netip.MustParseAddr("2001:db8::101"))
}

func TestClusterFailoverAndReturn(t *testing.T) {
	c := newCluster(t)
	vips := testVIPs()
	all := []string{"gw-a", "gw-b", "gw-c"}
	for _, n := range all {
		c.start(n)
	}
	c.setVIPs(vips)
	d := c.waitOwners(vips, all, 30*time.Second)
	t.Logf("3 gateways, %d VIPs: converged %v after SetVIPs; spread %v", len(vips), d.Round(time.Millisecond), c.ownership())

	// gw-c fails: its VIPs go to the survivors, the others do not move.
	c.kill("gw-c")
	d = c.waitOwners(vips, []string{"gw-a", "gw-b"}, 30*time.Second)
	t.Logf("gw-c killed: survivors own all %d VIPs after %v (memberlist detection + claim)", len(vips), d.Round(time.Millisecond))

	// gw-c returns with the same name: it settles, then takes its share back.
	n := c.start("gw-c")
	c.setVIPs(vips)
	d = c.waitOwners(vips, all, 30*time.Second)
	t.Logf("gw-c back: rebalanced after %v (settle 300 ms + handover)", d.Round(time.Millisecond))
	if bad := c.overlaps(); len(bad) > 0 {
		t.Fatalf("two gateways answered for one VIP at once:\n%s", strings.Join(bad, "\n"))
	}
	st := n.a.Status()
	if st.Kind != "l2" || len(st.Peers) != 3 || !strings.HasPrefix(st.Peers[0].Detail, "self, ready") {
		t.Fatalf("status %+v", st)
	}
	for _, p := range st.Peers[1:] {
		if p.State != "alive" || !strings.HasPrefix(p.Detail, "ready") {
			t.Fatalf("peer %+v", p)
		}
	}
	t.Logf("status of gw-c: owned %v", st.Owned)
	for _, p := range st.Peers {
		t.Logf("  %s %s %s: %s", p.Name, p.Address, p.State, p.Detail)
	}
}

func TestClusterGivesUpWhenUnhealthyOrUplinkDown(t *testing.T) {
	c := newCluster(t)
	vips := testVIPs()
	a, _ := c.start("gw-a"), c.start("gw-b")
	c.setVIPs(vips)
	both := []string{"gw-a", "gw-b"}
	c.waitOwners(vips, both, 30*time.Second)

	a.a.SetHealthy(false)
	if got := append(a.arp.Owned(), a.ndp.Owned()...); len(got) != 0 {
		t.Fatalf("unhealthy gateway still answers for %v after SetHealthy returned", got)
	}
	d := c.waitOwners(vips, []string{"gw-b"}, 30*time.Second)
	t.Logf("dataplane unhealthy on gw-a: gw-b owns everything after %v", d.Round(time.Millisecond))
	if !strings.Contains(a.a.Status().Peers[0].Detail, "dataplane unhealthy") {
		t.Fatalf("status: %+v", a.a.Status().Peers[0])
	}
	a.a.SetHealthy(true)
	d = c.waitOwners(vips, both, 30*time.Second)
	t.Logf("healthy again: rebalanced after %v", d.Round(time.Millisecond))

	a.up.Set(false)
	d = c.waitOwners(vips, []string{"gw-b"}, 30*time.Second)
	t.Logf("uplink down on gw-a: gw-b owns everything after %v", d.Round(time.Millisecond))
	a.up.Set(true)
	c.waitOwners(vips, both, 30*time.Second)
	if bad := c.overlaps(); len(bad) > 0 {
		t.Fatalf("overlap:\n%s", strings.Join(bad, "\n"))
	}
}

func TestClusterWithdrawingCloseHandsOverAtOnce(t *testing.T) {
	c := newCluster(t)
	vips := testVIPs()
	a, _ := c.start("gw-a"), c.start("gw-b")
	c.setVIPs(vips)
	c.waitOwners(vips, []string{"gw-a", "gw-b"}, 30*time.Second)
	t0 := time.Now()
	c.mu.Lock()
	delete(c.nodes, "gw-a")
	c.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- a.a.Close(true) }()
	d := c.waitOwners(vips, []string{"gw-b"}, 30*time.Second)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Logf("gw-a closed with withdraw: gw-b owns everything %v after Close began (Close itself took %v, with memberlist's Leave)",
		d.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	if bad := c.overlaps(); len(bad) > 0 {
		t.Fatalf("overlap:\n%s", strings.Join(bad, "\n"))
	}
}

func TestAloneOwnsEverything(t *testing.T) {
	arpR, ndpR := NewFakeResponder(), NewFakeResponder()
	a, err := New(Config{Interface: "lo", ARP: arpR, NDP: ndpR, Uplink: NewFakeUplink(true), Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(true)
	vips := testVIPs()
	var vs []announce.VIP
	for _, v := range vips {
		vs = append(vs, announce.VIP{Addr: v})
	}
	if err := a.SetVIPs(context.Background(), vs); err != nil {
		t.Fatal(err)
	}
	if got := append(arpR.Owned(), ndpR.Owned()...); len(got) != len(vips) {
		t.Fatalf("alone: owns %v right after SetVIPs", got)
	}
	if err := a.SetVIPs(context.Background(), []announce.VIP{{Addr: netip.MustParseAddr("224.0.0.1")}}); err == nil {
		t.Fatal("multicast VIP accepted")
	}
	if len(arpR.Owned())+len(ndpR.Owned()) != 0 {
		t.Fatal("still owns VIPs no longer declared")
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, `"interface"`},
		{Config{Interface: "eth0", Members: &Members{}}, `"members.name"`},
		{Config{Interface: "eth0", Members: &Members{Name: "a", Key: []byte("short")}}, `"members.key"`},
		{Config{Interface: "eth0", Members: &Members{Name: "a", Tuning: Tuning{ProbeTimeout: time.Second}}}, `"members.tuning.probeTimeout"`},
		{Config{Interface: "eth0", Members: &Members{Name: "a", Join: []netip.AddrPort{{}}}}, `"members.join[0]"`},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want mention of %s", tc.cfg, err, tc.want)
		}
	}
}

// TestClusterFalseDeathRecovers: memberlist on gw-a wrongly declares gw-b
// dead (a starved process), then sees it alive again. gw-b noticed nothing,
// so it would never resend its state on its own: gw-a must ask for it, or it
// would take gw-b as "not ready" after StateWait and keep gw-b's VIPs for good.
func TestClusterFalseDeathRecovers(t *testing.T) {
	c := newCluster(t)
	// No periodic full state sync during the test: only gw-a asking can
	// bring gw-b's state back, however long the wait below takes.
	c.pushPull = time.Hour
	vips := testVIPs()
	a, b := c.start("gw-a"), c.start("gw-b")
	c.setVIPs(vips)
	both := []string{"gw-a", "gw-b"}
	c.waitOwners(vips, both, 30*time.Second)

	var node memberlist.Node
	for _, n := range a.a.ml.Members() {
		if n.Name == "gw-b" {
			node = *n
		}
	}
	a.a.memberGone(&node) // what NotifyLeave would do on a false positive
	c.mu.Lock()
	delete(c.nodes, "gw-b") // gw-a alone owns everything now (a real split brain with gw-b)
	c.mu.Unlock()
	c.waitOwners(vips, []string{"gw-a"}, 30*time.Second)
	c.mu.Lock()
	c.nodes["gw-b"] = b
	c.mu.Unlock()

	t0 := time.Now()
	a.a.memberAlive(&node) // the refutation: gw-b is alive after all
	// Without the ask the split would never heal (push/pull is off): the
	// deadline only catches that, the time it took is a measurement.
	d := c.waitOwners(vips, both, 30*time.Second)
	t.Logf("MEASURED gw-b back in gw-a's view: its state was asked for and the split restored after %v (%v since; StateWait 1 s)", d.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}
