//go:build netns

package nft

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nftgen"
)

// dump renders everything in the namespace's nftables as sorted lines, read
// over netlink: every table; for ours, chains, rules (by comment, foreign
// ones by their expressions), sets and elements.
func dump(t testing.TB, ns *netns.NS) []string {
	t.Helper()
	c := rawConn(t, ns)
	var out []string
	tables, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		fam := map[gnft.TableFamily]string{gnft.TableFamilyIPv4: "ip", gnft.TableFamilyIPv6: "ip6", gnft.TableFamilyINet: "inet"}[tb.Family]
		p := fam + " " + tb.Name
		out = append(out, "table "+p)
		chains, err := c.ListChainsOfTableFamily(tb.Family)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chains {
			if ch.Table.Name != tb.Name {
				continue
			}
			out = append(out, p+" chain "+ch.Name)
			rules, err := c.GetRules(tb, ch)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rules {
				com, _ := userdata.GetString(r.UserData, userdata.TypeComment)
				if com == "" {
					com = fmt.Sprintf("%d exprs", len(r.Exprs))
				}
				out = append(out, fmt.Sprintf("%s chain %s rule %d %s", p, ch.Name, i, com))
			}
		}
		sets, err := c.GetSets(tb)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			out = append(out, p+" set "+s.Name)
			if s.Name == setAff {
				continue // written by the packet path
			}
			els, err := c.GetSetElements(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range els {
				v := hex.EncodeToString(e.Val)
				if s.Name == setDispatch || s.Name == setPost {
					v = decodeVerdict(e.Val)
				}
				out = append(out, fmt.Sprintf("%s set %s elem %s %s", p, s.Name, hex.EncodeToString(e.Key), v))
			}
		}
	}
	slices.Sort(out)
	return out
}

// diffLines returns lines only in a (-) and only in b (+).
func diffLines(a, b []string) (gone, added []string) {
	in := func(xs []string, x string) bool { _, ok := slices.BinarySearch(xs, x); return ok }
	for _, x := range a {
		if !in(b, x) {
			gone = append(gone, x)
		}
	}
	for _, x := range b {
		if !in(a, x) {
			added = append(added, x)
		}
	}
	return gone, added
}

// genID reads the nftables generation, which every committed batch bumps.
func genID(t testing.TB, ns *netns.NS) uint32 {
	t.Helper()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(ns.Handle())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := nftgen.Read(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func newDP(t testing.TB, ns *netns.NS) *Dataplane {
	t.Helper()
	d, err := New(Options{NetNS: int(ns.Handle())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestNetnsUpdateOneAmong1000 changes one service among 1,000 and asserts
// on the kernel state that only that service's elements changed, in one
// transaction.
func TestNetnsUpdateOneAmong1000(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(1000, 10)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	before, gen0, st0 := dump(t, ns), genID(t, ns), d.Stats()
	t.Logf("1000 services: %d kernel objects (chains, rules, sets, elements)", len(before))

	victim := &cfg.Services[617]
	victim.Backends[3].Addr = netip.MustParseAddrPort("198.51.100.252:9000")
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	after, gen1, st1 := dump(t, ns), genID(t, ns), d.Stats()
	gone, added := diffLines(before, after)
	t.Logf("changed one service: %d batch(es), %d messages, %d element writes; generation %d → %d; -%d +%d kernel lines",
		st1.Batches-st0.Batches, st1.Messages-st0.Messages, st1.Elements-st0.Elements, gen0, gen1, len(gone), len(added))
	if gen1-gen0 != 1 || st1.Batches-st0.Batches != 1 {
		t.Errorf("want exactly one transaction, generation moved %d, batches %d", gen1-gen0, st1.Batches-st0.Batches)
	}
	id := d.svcs[victim.Key()].id
	idHex := hex.EncodeToString(encU32(id))
	vipHex := hex.EncodeToString(encVIPKey(victim.VIP, victim.Protocol, victim.Port))
	mine := func(l string) bool {
		// be: key id . bucket; dispatch/post: key id; vip: the frontend.
		return strings.Contains(l, " set be elem "+idHex) || strings.Contains(l, " elem "+idHex+" ") ||
			strings.Contains(l, " set vip elem "+vipHex+" ")
	}
	for _, l := range append(gone, added...) {
		if !mine(l) {
			t.Errorf("a kernel object outside service %s (id %#x) changed: %s", victim.Key(), id, l)
		}
	}
	if len(added) == 0 {
		t.Error("nothing changed in the kernel")
	}
	for _, l := range gone {
		t.Logf("  - %s", l)
	}
	for _, l := range added {
		t.Logf("  + %s", l)
	}
}

// TestNetnsIdempotent: applying the same Config again writes nothing.
func TestNetnsIdempotent(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(200, 4)
	cfg.Services[3].Affinity = 3 * 60e9
	cfg.Services[4].Scheduler = proxy.SourceHash
	cfg.Services[5].Method = proxy.NATNoSNAT
	cfg.Services[6].Backends[1].Weight = 0
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st0, gen0, dump0 := d.Stats(), genID(t, ns), dump(t, ns)
	// The same services in another order, backends shuffled: still nothing.
	again := proxy.Config{NodeAddrs: cfg.NodeAddrs}
	for i := len(cfg.Services) - 1; i >= 0; i-- {
		s := cfg.Services[i]
		s.Backends = slices.Clone(s.Backends)
		slices.Reverse(s.Backends)
		again.Services = append(again.Services, s)
	}
	for _, c := range []proxy.Config{cfg, cfg, again} {
		if err := d.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	st1, gen1 := d.Stats(), genID(t, ns)
	t.Logf("3 more Applies of the same state: %d batches, %d messages, generation %d → %d",
		st1.Batches-st0.Batches, st1.Messages-st0.Messages, gen0, gen1)
	if st1.Batches != st0.Batches || st1.Messages != st0.Messages || gen1 != gen0 {
		t.Errorf("identical Apply wrote to the kernel: %+v → %+v, generation %d → %d", st0, st1, gen0, gen1)
	}
	if gone, added := diffLines(dump0, dump(t, ns)); len(gone)+len(added) > 0 {
		t.Errorf("kernel state changed: -%v +%v", gone, added)
	}
	// A restarted daemon (new Dataplane, same kernel) adopts the table: it
	// reads, but writes no element, even after buckets were rearranged by
	// an update (keepPositions).
	cfg.Services[9].Backends[0].Addr = netip.MustParseAddrPort("198.51.100.253:7000")
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d2 := newDP(t, ns)
	if err := d2.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st2 := d2.Stats()
	t.Logf("restart: %d reads, %d batches, %d element writes", st2.Reads, st2.Batches, st2.Elements)
	if st2.Elements != 0 || st2.Batches != 0 {
		t.Errorf("a restart rewrote the table: %+v", st2)
	}
}

// foreign adds tables, chains, rules and sets edgelb does not own, some
// inside edgelb's own table.
func foreign(t testing.TB, ns *netns.NS) {
	t.Helper()
	c := rawConn(t, ns)
	other := c.AddTable(&gnft.Table{Family: gnft.TableFamilyINet, Name: "other"})
	ch := c.AddChain(&gnft.Chain{Table: other, Name: "input", Type: gnft.ChainTypeFilter,
		Hooknum: gnft.ChainHookInput, Priority: gnft.ChainPriorityFilter})
	c.AddRule(&gnft.Rule{Table: other, Chain: ch, Exprs: []expr.Any{&expr.Counter{}}})
	if err := c.AddSet(&gnft.Set{Table: other, Name: "blocked", KeyType: gnft.TypeIPAddr}, []gnft.SetElement{{Key: []byte{192, 0, 2, 99}}}); err != nil {
		t.Fatal(err)
	}
	nat := c.AddTable(&gnft.Table{Family: gnft.TableFamilyIPv4, Name: "nat"})
	pre := c.AddChain(&gnft.Chain{Table: nat, Name: "PREROUTING", Type: gnft.ChainTypeNAT,
		Hooknum: gnft.ChainHookPrerouting, Priority: gnft.ChainPriorityNATDest})
	c.AddRule(&gnft.Rule{Table: nat, Chain: pre, Exprs: []expr.Any{&expr.Counter{}}})
	ours := &gnft.Table{Family: gnft.TableFamilyIPv4, Name: DefaultTable}
	c.AddChain(&gnft.Chain{Table: ours, Name: "someone-elses"})
	c.AddRule(&gnft.Rule{Table: ours, Chain: &gnft.Chain{Table: ours, Name: chainServices}, Exprs: []expr.Any{&expr.Counter{}}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestNetnsForeignUntouched: other tables, and chains and rules someone
// added to edgelb's table, survive Apply, Resync and (for other tables)
// Cleanup.
func TestNetnsForeignUntouched(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(20, 3)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	foreign(t, ns)
	isForeign := func(l string) bool {
		return strings.HasPrefix(l, "table inet other") || strings.HasPrefix(l, "inet other") ||
			strings.HasPrefix(l, "table ip nat") || strings.HasPrefix(l, "ip nat") ||
			strings.Contains(l, "someone-elses") || strings.Contains(l, "1 exprs")
	}
	var want []string
	for _, l := range dump(t, ns) {
		if isForeign(l) {
			want = append(want, l)
		}
	}
	t.Logf("foreign objects: %d", len(want))
	check := func(step string, all bool) {
		t.Helper()
		var got []string
		for _, l := range dump(t, ns) {
			if isForeign(l) && (all || !strings.HasPrefix(strings.TrimPrefix(l, "table "), "ip "+DefaultTable)) {
				got = append(got, l)
			}
		}
		w := want
		if !all {
			w = nil
			for _, l := range want {
				if !strings.HasPrefix(strings.TrimPrefix(l, "table "), "ip "+DefaultTable) {
					w = append(w, l)
				}
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("after %s foreign objects changed:\n got %q\nwant %q", step, got, w)
		}
	}
	cfg.Services = cfg.Services[5:]
	cfg.Services[0].Backends = cfg.Services[0].Backends[:1]
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	check("Apply", true)
	if err := d.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	check("Resync", true)
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	check("Cleanup", false)
	for _, l := range dump(t, ns) {
		if strings.Contains(l, " "+DefaultTable) {
			t.Errorf("Cleanup left %s", l)
		}
	}
}

// TestNetnsResyncRepairs damages the tables by hand in several ways and
// checks Resync restores exactly the state Apply made.
func TestNetnsResyncRepairs(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(50, 3)
	cfg.Services[1].Affinity = 60e9
	cfg.Services[2].Scheduler = proxy.SourceHash
	v6 := proxy.Service{Name: "v6", VIP: netip.MustParseAddr("2001:db8:ff::1"), Port: 443, Protocol: proxy.TCP,
		NodePort: 31443, Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("[2001:db8:1::5]:8443"), Weight: 2}}}
	cfg.Services = append(cfg.Services, v6)
	cfg.NodeAddrs = append(cfg.NodeAddrs, netip.MustParseAddr("2001:db8:1::1"))
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	good := dump(t, ns)
	tb4 := &gnft.Table{Family: gnft.TableFamilyIPv4, Name: DefaultTable}
	tb6 := &gnft.Table{Family: gnft.TableFamilyIPv6, Name: DefaultTable}
	svc := cfg.Services[7]
	id := d.svcs[svc.Key()].id
	set := func(tb *gnft.Table, name string) *gnft.Set { return &gnft.Set{Table: tb, Name: name} }
	tampers := []struct {
		name string
		do   func(c *gnft.Conn) error
	}{
		{"delete a backend element", func(c *gnft.Conn) error {
			return c.SetDeleteElements(set(tb4, setBE), []gnft.SetElement{{Key: encBucketKey(id, 1)}})
		}},
		{"rewrite a backend element", func(c *gnft.Conn) error {
			k := encBucketKey(id, 0)
			if err := c.SetDeleteElements(set(tb4, setBE), []gnft.SetElement{{Key: k}}); err != nil {
				return err
			}
			return c.SetAddElements(set(tb4, setBE), []gnft.SetElement{{Key: k, Val: encBackend(netip.MustParseAddrPort("192.0.2.66:1"))}})
		}},
		{"add a stray element", func(c *gnft.Conn) error {
			return c.SetAddElements(set(tb4, setVIP), []gnft.SetElement{{Key: encVIPKey(netip.MustParseAddr("203.0.113.251"), proxy.UDP, 9), Val: encU32(id)}})
		}},
		{"delete a dispatch element", func(c *gnft.Conn) error {
			return c.SetDeleteElements(set(tb4, setDispatch), []gnft.SetElement{{Key: encU32(id)}})
		}},
		{"flush a pick chain", func(c *gnft.Conn) error {
			c.FlushChain(&gnft.Chain{Table: tb4, Name: pick{kind: pickRandom, n: 3}.chain()})
			return nil
		}},
		{"delete the prerouting hook chain", func(c *gnft.Conn) error {
			c.DelChain(&gnft.Chain{Table: tb4, Name: chainPrerouting})
			return nil
		}},
		{"delete the postrouting hook chain", func(c *gnft.Conn) error {
			c.DelChain(&gnft.Chain{Table: tb6, Name: chainPostrouting})
			return nil
		}},
		{"delete the ip table", func(c *gnft.Conn) error { c.DelTable(tb4); return nil }},
		{"delete the ip6 table", func(c *gnft.Conn) error { c.DelTable(tb6); return nil }},
	}
	for _, tc := range tampers {
		c := rawConn(t, ns)
		if err := tc.do(c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := c.Flush(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		bad := dump(t, ns)
		g, a := diffLines(good, bad)
		st0 := d.Stats()
		if err := d.Resync(ctx); err != nil {
			t.Fatalf("resync after %s: %v", tc.name, err)
		}
		st1 := d.Stats()
		g2, a2 := diffLines(good, dump(t, ns))
		t.Logf("%s: -%d +%d kernel lines; resync: %d batch(es), %d messages, %d element writes", tc.name, len(g), len(a),
			st1.Batches-st0.Batches, st1.Messages-st0.Messages, st1.Elements-st0.Elements)
		if len(g)+len(a) == 0 {
			t.Errorf("%s changed nothing", tc.name)
		}
		if len(g2)+len(a2) > 0 {
			t.Errorf("after %s, resync left -%q +%q", tc.name, g2, a2)
		}
	}
	// A clean resync writes nothing.
	st0, gen0 := d.Stats(), genID(t, ns)
	if err := d.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if st1, gen1 := d.Stats(), genID(t, ns); st1.Batches != st0.Batches || gen1 != gen0 {
		t.Errorf("resync of a clean table wrote: batches %d → %d, generation %d → %d", st0.Batches, st1.Batches, gen0, gen1)
	}
}

// TestNetnsErrorsTyped: a write the kernel refuses comes back wrapped with
// its errno, and the next Apply repairs from a read-back.
func TestNetnsErrorsTyped(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(10, 3)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Someone deletes an element this dataplane will delete next.
	id := d.svcs[cfg.Services[2].Key()].id
	c := rawConn(t, ns)
	if err := c.SetDeleteElements(&gnft.Set{Table: &gnft.Table{Family: gnft.TableFamilyIPv4, Name: DefaultTable}, Name: setBE},
		[]gnft.SetElement{{Key: encBucketKey(id, 2)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	cfg.Services[2].Backends = cfg.Services[2].Backends[:1]
	// The write fails with ENOENT; since issue 14 the same Apply then
	// isolates (isolate.go): the last good state is restored by a full
	// sync, which repairs the drift, and the change goes through after it.
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatalf("apply over a missing element: %v, want it repaired and applied in one call", err)
	}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatalf("the next Apply: %v", err)
	}
	if n := d.svcs[cfg.Services[2].Key()].buckets(); n != 1 {
		t.Errorf("buckets %d, want 1", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ctx, cfg); !errors.Is(err, errClosed) {
		t.Errorf("apply after close: %v", err)
	}
}

// TestNetnsDrainForgetsAffinity: remembered clients of a backend that is
// drained or removed are forgotten (so it takes no new connections from
// them), others stay; a removed service's clients all go.
func TestNetnsDrainForgetsAffinity(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	s := proxy.Service{Name: "sticky", VIP: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: proxy.TCP, Affinity: time.Hour,
		Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("198.51.100.2:80"), Weight: 1}, {Addr: netip.MustParseAddrPort("198.51.100.3:80"), Weight: 1}}}
	other := s
	other.VIP, other.Name, other.Backends = netip.MustParseAddr("203.0.113.11"), "other", slices.Clone(s.Backends)
	if err := d.Apply(ctx, proxy.Config{Services: []proxy.Service{s, other}}); err != nil {
		t.Fatal(err)
	}
	id, oid := d.svcs[s.Key()].id, d.svcs[other.Key()].id
	aff := &gnft.Set{Table: &gnft.Table{Family: gnft.TableFamilyIPv4, Name: DefaultTable}, Name: setAff, HasTimeout: true}
	client := func(n byte) []byte { return []byte{192, 0, 2, n} }
	key := func(id uint32, n byte) []byte { return append(encU32(id), client(n)...) }
	// What the packet path would have remembered.
	c := rawConn(t, ns)
	if err := c.SetAddElements(aff, []gnft.SetElement{
		{Key: key(id, 1), Val: encBackend(s.Backends[0].Addr), Timeout: time.Hour},
		{Key: key(id, 2), Val: encBackend(s.Backends[1].Addr), Timeout: time.Hour},
		{Key: key(oid, 1), Val: encBackend(s.Backends[0].Addr), Timeout: time.Hour},
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	remembered := func() []string {
		els, err := rawConn(t, ns).GetSetElements(aff)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range els {
			ap, _ := decBackend(e.Val)
			out = append(out, fmt.Sprintf("%#x/%d→%s", decU32(e.Key[:4]), e.Key[7], ap))
		}
		slices.Sort(out)
		return out
	}
	t.Logf("remembered: %v", remembered())
	s.Backends[0].Draining = true
	if err := d.Apply(ctx, proxy.Config{Services: []proxy.Service{s, other}}); err != nil {
		t.Fatal(err)
	}
	got := remembered()
	want := []string{fmt.Sprintf("%#x/1→198.51.100.2:80", oid), fmt.Sprintf("%#x/2→198.51.100.3:80", id)}
	slices.Sort(want)
	t.Logf("after draining 198.51.100.2: %v", got)
	if !slices.Equal(got, want) {
		t.Errorf("remembered %v, want %v", got, want)
	}
	if err := d.Apply(ctx, proxy.Config{Services: []proxy.Service{s}}); err != nil {
		t.Fatal(err)
	}
	if got := remembered(); len(got) != 1 {
		t.Errorf("after removing the other service: %v", got)
	}
}

// TestNetnsLocalOrigin: connections the gateway itself opens to a VIP or
// node port are balanced too (the output hook), and masqueraded.
func TestNetnsLocalOrigin(t *testing.T) {
	topo := conformance.NewTopology(t, "nfo")
	d := newDP(t, topo.Gateway)
	svc := proxy.Service{Name: "local", VIP: netip.MustParseAddr("203.0.113.77"), Port: 80, Protocol: proxy.TCP, NodePort: 30777}
	for i := range topo.Backends {
		svc.Backends = append(svc.Backends, proxy.Backend{Addr: topo.Backend4(i, conformance.HTTPPort), Weight: 1})
	}
	if err := d.Apply(context.Background(), proxy.Config{Services: []proxy.Service{svc}, NodeAddrs: []netip.Addr{conformance.GatewayAddr4}}); err != nil {
		t.Fatal(err)
	}
	// A local socket needs some route to the VIP before the output hook
	// (where the DNAT re-routes it); a real gateway has a default route.
	if err := topo.Gateway.AddRoute(netip.MustParsePrefix("203.0.113.0/24"), topo.Backends[0].Addr4); err != nil {
		t.Fatal(err)
	}
	hc := topo.Gateway.HTTPClient(3 * time.Second)
	for _, url := range []string{"http://203.0.113.77/", "http://192.0.2.1:30777/"} {
		seen := map[string]int{}
		for i := 0; i < 30; i++ {
			resp, err := hc.Get(url)
			if err != nil {
				t.Fatalf("%s from the gateway: %v", url, err)
			}
			body := make([]byte, 16)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			seen[string(body[:n])]++
		}
		t.Logf("%s from the gateway itself: %v", url, seen)
		if len(seen) < 2 {
			t.Errorf("%s: local connections not balanced: %v", url, seen)
		}
	}
}

// TestNetnsNodeAddrs: node addresses follow the Config (both families).
func TestNetnsNodeAddrs(t *testing.T) {
	ns := netns.NewT(t, "nfk")
	d := newDP(t, ns)
	ctx := context.Background()
	cfg := genConfig(3, 2)
	nodes := func() []string {
		var out []string
		for _, l := range dump(t, ns) {
			if strings.Contains(l, " set nodeaddrs elem ") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, addrs := range [][]string{{"192.0.2.1"}, {"192.0.2.1", "192.0.2.7", "2001:db8::1"}, {"2001:db8::2"}, nil} {
		cfg.NodeAddrs = nil
		for _, a := range addrs {
			cfg.NodeAddrs = append(cfg.NodeAddrs, netip.MustParseAddr(a))
		}
		if err := d.Apply(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if got := nodes(); len(got) != len(addrs) {
			t.Errorf("node addresses %v: kernel has %v", addrs, got)
		}
	}
}
