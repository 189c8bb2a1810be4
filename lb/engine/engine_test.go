package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

var ctx = context.Background()

func mustPool(t testing.TB, name string, auto bool, ranges ...string) lb.Pool {
	t.Helper()
	p := lb.Pool{Name: name, AutoAssign: auto}
	for _, s := range ranges {
		r, err := lb.ParseRange(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func svc(name string, port uint16, backends ...string) lb.ServiceSpec {
	s := lb.ServiceSpec{Name: name, Ports: []lb.PortSpec{{Port: port, Protocol: proxy.TCP}}}
	for _, b := range backends {
		s.Backends = append(s.Backends, lb.BackendSpec{Addr: addr(b), Weight: 1})
	}
	return s
}

// start runs an engine on st until the test ends.
func start(t testing.TB, st store.Store, opts Options) *Engine {
	t.Helper()
	e, err := NewEngine(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(c)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return e
}

func TestDesiredState(t *testing.T) {
	opts := Options{NodeAddrs: []netip.Addr{addr("203.0.113.1")}}
	e := start(t, store.NewMem(), opts)
	p := mustPool(t, "p", true, "192.0.2.0/29", "2001:db8::/126")
	p.Advertisement = lb.Advertisement{Communities: []string{"65000:1"}, LocalPref: 200}
	if _, err := e.CreatePool(ctx, p); err != nil {
		t.Fatal(err)
	}
	web := lb.ServiceSpec{
		Name:     "web",
		Families: []lb.Family{lb.IPv4, lb.IPv6},
		Ports: []lb.PortSpec{
			{Name: "http", Port: 80, Protocol: proxy.TCP, TargetPort: 8080, NodePort: 30080},
			{Port: 53, Protocol: proxy.UDP},
		},
		Backends: []lb.BackendSpec{
			{Addr: addr("198.51.100.2"), Weight: 1},
			{Addr: addr("198.51.100.3"), Port: 9090, Weight: 3},
			{Addr: addr("2001:db8:1::2"), Weight: 2},
		},
		Affinity: time.Minute,
	}
	st, created, err := e.PutService(ctx, web)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if want := []netip.Addr{addr("192.0.2.0"), addr("2001:db8::")}; !reflect.DeepEqual(st.VIPs, want) || st.Pending != "" {
		t.Fatalf("status %+v", st)
	}
	// A node-port-only view while a service waits: "wait" asks a pool with no IPv4 left.
	if _, err := e.CreatePool(ctx, mustPool(t, "tiny", false, "192.0.2.8/32")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.PutService(ctx, lb.ServiceSpec{Name: "a", Pool: "tiny", Ports: []lb.PortSpec{{Port: 22, Protocol: proxy.TCP}}}); err != nil {
		t.Fatal(err)
	}
	w := lb.ServiceSpec{Name: "wait", Pool: "tiny", Ports: []lb.PortSpec{{Port: 443, Protocol: proxy.TCP, NodePort: 30443}},
		Backends: []lb.BackendSpec{{Addr: addr("198.51.100.9"), Weight: 1}}}
	st, _, err = e.PutService(ctx, w)
	if err != nil || st.Pending == "" || len(st.VIPs) != 0 {
		t.Fatalf("wait: %+v %v", st, err)
	}
	if !strings.Contains(st.Pending, `"tiny"`) {
		t.Fatalf("pending reason %q does not name the pool", st.Pending)
	}

	be := func(s string, w uint32) proxy.Backend {
		return proxy.Backend{Addr: netip.MustParseAddrPort(s), Weight: w}
	}
	common := proxy.Service{Scheduler: proxy.WeightedRoundRobin, Method: proxy.NAT}
	mk := func(name string, vip string, port uint16, proto proxy.Protocol, np uint16, aff time.Duration, bs ...proxy.Backend) proxy.Service {
		s := common
		s.Name, s.Port, s.Protocol, s.NodePort, s.Affinity, s.Backends = name, port, proto, np, aff, bs
		if vip != "" {
			s.VIP = addr(vip)
		}
		return s
	}
	fam := func(s proxy.Service, f proxy.Family) proxy.Service { s.Family = f; return s }
	want := lb.Desired{
		Dataplane: proxy.Config{NodeAddrs: opts.NodeAddrs, Services: []proxy.Service{
			mk("a/22-TCP", "192.0.2.8", 22, proxy.TCP, 0, 0),
			fam(mk("wait/443-TCP/nodeport", "", 443, proxy.TCP, 30443, 0, be("198.51.100.9:443", 1)), proxy.IPv4),
			mk("web/http", "192.0.2.0", 80, proxy.TCP, 0, time.Minute, be("198.51.100.2:8080", 1), be("198.51.100.3:9090", 3)),
			mk("web/http", "2001:db8::", 80, proxy.TCP, 0, time.Minute, be("[2001:db8:1::2]:8080", 2)),
			// The node port: one service per family (issue 14).
			fam(mk("web/http/nodeport", "", 80, proxy.TCP, 30080, time.Minute, be("198.51.100.2:8080", 1), be("198.51.100.3:9090", 3)), proxy.IPv4),
			fam(mk("web/http/nodeport", "", 80, proxy.TCP, 30080, time.Minute, be("[2001:db8:1::2]:8080", 2)), proxy.IPv6),
			mk("web/53-UDP", "192.0.2.0", 53, proxy.UDP, 0, time.Minute, be("198.51.100.2:53", 1), be("198.51.100.3:9090", 3)),
			mk("web/53-UDP", "2001:db8::", 53, proxy.UDP, 0, time.Minute, be("[2001:db8:1::2]:53", 2)),
		}},
		VIPs: []announce.VIP{
			{Addr: addr("192.0.2.0"), Pool: "p", Communities: []string{"65000:1"}, LocalPref: 200},
			{Addr: addr("192.0.2.8"), Pool: "tiny"},
			{Addr: addr("2001:db8::"), Pool: "p", Communities: []string{"65000:1"}, LocalPref: 200},
		},
	}
	got := e.Desired()
	for i := range got.VIPs {
		if len(got.VIPs[i].Communities) == 0 {
			got.VIPs[i].Communities = nil
		}
		if len(got.VIPs[i].LargeCommunities) == 0 {
			got.VIPs[i].LargeCommunities = nil
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("desired:\n got %+v\nwant %+v", got, want)
	}

	// An unhealthy backend goes to the dataplane with weight 0.
	if err := e.SetBackendHealth(ctx, "web", netip.MustParseAddrPort("198.51.100.3:9090"), false); err != nil {
		t.Fatal(err)
	}
	d := e.Desired()
	if b := d.Dataplane.Services[2].Backends[1]; b.Weight != 0 || d.Dataplane.Services[4].Backends[1].Weight != 0 {
		t.Fatalf("unhealthy backend: %+v", d.Dataplane.Services[2].Backends)
	}
	if err := e.SetBackendHealth(ctx, "web", netip.MustParseAddrPort("198.51.100.3:9090"), true); err != nil {
		t.Fatal(err)
	}
	if b := e.Desired().Dataplane.Services[2].Backends[1]; b.Weight != 3 {
		t.Fatalf("healthy again: %+v", b)
	}
	if err := e.SetBackendHealth(ctx, "nope", netip.MustParseAddrPort("198.51.100.3:9090"), true); !errors.Is(err, lb.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestRefusals: every refused operation returns the right error type and
// leaves the store, the statuses and the desired state unchanged.
func TestRefusals(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreatePool(ctx, mustPool(t, "q", false, "198.51.100.0/28")); err != nil {
		t.Fatal(err)
	}
	base := svc("web", 80, "198.51.100.20")
	base.Ports[0].NodePort = 30080
	if _, _, err := e.PutService(ctx, base); err != nil {
		t.Fatal(err)
	}
	fixed := svc("fixed", 80)
	fixed.VIPs = []netip.Addr{addr("198.51.100.5")}
	if _, _, err := e.PutService(ctx, fixed); err != nil {
		t.Fatal(err)
	}

	type kind int
	const (
		field kind = iota
		conflict
		notFound
		storeFail
	)
	for _, tc := range []struct {
		desc  string
		op    func() error
		want  kind
		quote []string
	}{
		{"pool overlap", func() error { _, err := e.CreatePool(ctx, mustPool(t, "x", true, "192.0.2.8/29")); return err },
			conflict, []string{"192.0.2.8/29", "192.0.2.0/28"}},
		{"pool name in use", func() error { _, err := e.CreatePool(ctx, mustPool(t, "p", true, "203.0.113.0/24")); return err },
			conflict, []string{`"p"`}},
		{"invalid pool", func() error { _, err := e.CreatePool(ctx, lb.Pool{Name: "x"}); return err }, field, []string{"addresses"}},
		{"shrink over an address in use", func() error { _, err := e.UpdatePool(ctx, mustPool(t, "q", false, "198.51.100.8/29")); return err },
			conflict, []string{"198.51.100.5", `"fixed"`}},
		{"update overlapping", func() error { _, err := e.UpdatePool(ctx, mustPool(t, "q", false, "192.0.2.0/24")); return err },
			conflict, []string{"192.0.2.0/24"}},
		{"update unknown", func() error { _, err := e.UpdatePool(ctx, mustPool(t, "zz", false, "203.0.113.0/24")); return err }, notFound, nil},
		{"delete pool in use", func() error { return e.DeletePool(ctx, "q") }, conflict, []string{`"fixed"`}},
		{"delete unknown pool", func() error { return e.DeletePool(ctx, "zz") }, notFound, nil},
		{"port out of range", func() error { s := svc("new", 0); _, _, err := e.PutService(ctx, s); return err }, field, []string{"ports[0].port"}},
		{"duplicate port", func() error {
			s := svc("new", 80)
			s.Ports = append(s.Ports, s.Ports[0])
			_, _, err := e.PutService(ctx, s)
			return err
		}, field, []string{"80/TCP"}},
		{"VIP outside every pool", func() error {
			s := svc("new", 80)
			s.VIPs = []netip.Addr{addr("203.0.113.9")}
			_, _, err := e.PutService(ctx, s)
			return err
		}, field, []string{"vips[0]", "203.0.113.9"}},
		{"VIP taken", func() error {
			s := svc("new", 443)
			s.VIPs = []netip.Addr{addr("198.51.100.5")}
			_, _, err := e.PutService(ctx, s)
			return err
		}, conflict, []string{"198.51.100.5", `"fixed"`}},
		{"node port of another service", func() error {
			s := svc("new", 443)
			s.Ports[0].NodePort = 30080
			_, _, err := e.PutService(ctx, s)
			return err
		}, field, []string{"30080", `"web"`}},
		{"node port outside the range", func() error {
			s := svc("new", 443)
			s.Ports[0].NodePort = 8080
			_, _, err := e.PutService(ctx, s)
			return err
		}, field, []string{"8080", "30000-32767"}},
		{"unknown scheduler", func() error {
			s := svc("new", 443)
			s.Scheduler = "fastest"
			_, _, err := e.PutService(ctx, s)
			return err
		}, field, []string{"scheduler", "fastest"}},
		{"unknown pool", func() error { s := svc("new", 443); s.Pool = "zz"; _, _, err := e.PutService(ctx, s); return err }, field, []string{"pool", "zz"}},
		{"delete unknown service", func() error { return e.DeleteService(ctx, "zz") }, notFound, nil},
		{"store write fails on put", func() error {
			mem.FailCommits(errors.New("disk full"))
			defer mem.FailCommits(nil)
			_, _, err := e.PutService(ctx, svc("new", 443))
			return err
		}, storeFail, []string{"disk full"}},
		{"store write fails on delete", func() error {
			mem.FailCommits(errors.New("disk full"))
			defer mem.FailCommits(nil)
			return e.DeleteService(ctx, "web")
		}, storeFail, nil},
		{"store write fails on pool update", func() error {
			mem.FailCommits(errors.New("disk full"))
			defer mem.FailCommits(nil)
			_, err := e.UpdatePool(ctx, mustPool(t, "p", true, "192.0.2.0/24"))
			return err
		}, storeFail, nil},
	} {
		commits := mem.Commits()
		pools, _ := e.Pools(ctx)
		svcs, _ := e.Services(ctx)
		desired := e.Desired()
		err := tc.op()
		var fe *lb.FieldError
		var ce *lb.ConflictError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.desc)
			continue
		case tc.want == field && !errors.As(err, &fe),
			tc.want == conflict && (!errors.As(err, &ce) || !errors.Is(err, lb.ErrConflict)),
			tc.want == notFound && !errors.Is(err, lb.ErrNotFound):
			t.Errorf("%s: wrong error type %T: %v", tc.desc, err, err)
		}
		for _, q := range tc.quote {
			if !strings.Contains(err.Error(), q) {
				t.Errorf("%s: %q does not mention %s", tc.desc, err, q)
			}
		}
		t.Logf("%s: %v", tc.desc, err)
		if mem.Commits() != commits {
			t.Errorf("%s: the store was written", tc.desc)
		}
		pools2, _ := e.Pools(ctx)
		svcs2, _ := e.Services(ctx)
		if !reflect.DeepEqual(pools, pools2) || !reflect.DeepEqual(svcs, svcs2) || !reflect.DeepEqual(desired, e.Desired()) {
			t.Errorf("%s: state changed", tc.desc)
		}
	}
	// After the failed writes the allocator still works from the old state:
	// the next service gets the address the failed one would have had.
	st, _, err := e.PutService(ctx, svc("new", 443))
	if err != nil || len(st.VIPs) != 1 || st.VIPs[0] != addr("192.0.2.1") {
		t.Fatalf("after failures: %+v %v", st, err)
	}
	// The refused changes left nothing behind in the render cache.
	checkRenderCache(t, e)
}

func TestPendingGetsFreedAddress(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := start(t, store.NewMem(), Options{Registry: reg})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/31")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, _, err := e.PutService(ctx, svc(n, 80)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.Service(ctx, "c")
	if c.Pending == "" || len(c.VIPs) != 0 || !strings.Contains(c.Pending, lb.ErrExhausted.Error()) {
		t.Fatalf("c: %+v", c)
	}
	if got := testutil.ToFloat64(e.met.pending); got != 2 {
		t.Fatalf("pending gauge %v", got)
	}
	a, _ := e.Service(ctx, "a")
	if err := e.DeleteService(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, _ = e.Service(ctx, "c")
	if c.Pending != "" || !reflect.DeepEqual(c.VIPs, a.VIPs) {
		t.Fatalf("c did not get a's address: %+v (a had %v)", c, a.VIPs)
	}
	// Growing the pool serves d.
	if _, err := e.UpdatePool(ctx, mustPool(t, "p", true, "192.0.2.0/30")); err != nil {
		t.Fatal(err)
	}
	d, _ := e.Service(ctx, "d")
	if d.Pending != "" || len(d.VIPs) != 1 {
		t.Fatalf("d: %+v", d)
	}
	ps, _ := e.Pool(ctx, "p")
	if ps.Size != 4 || ps.Used != 3 {
		t.Fatalf("pool status %+v", ps)
	}
	if got := testutil.ToFloat64(e.met.poolUsed.WithLabelValues("p")); got != 3 {
		t.Fatalf("pool used gauge %v", got)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n == 0 {
		t.Fatal(n, err)
	}
}

func TestSyncConfig(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{})
	// The API's own pool and service, which a reload must leave alone.
	if _, err := e.CreatePool(ctx, mustPool(t, "api-pool", false, "198.51.100.0/28")); err != nil {
		t.Fatal(err)
	}
	apiSvc := svc("api-svc", 80)
	apiSvc.VIPs = []netip.Addr{addr("198.51.100.1")}
	if _, _, err := e.PutService(ctx, apiSvc); err != nil {
		t.Fatal(err)
	}

	cfgPools := []lb.Pool{mustPool(t, "cfg", true, "192.0.2.0/28")}
	one, two := svc("one", 80), svc("two", 81)
	if err := e.SyncConfig(ctx, cfgPools, []lb.ServiceSpec{one, two}); err != nil {
		t.Fatal(err)
	}
	st, _ := mem.Load()
	if st.Pools["cfg"].Origin != store.OriginConfig || st.Services["one"].Origin != store.OriginConfig ||
		st.Services["api-svc"].Origin != store.OriginAPI || len(st.Assignments) != 3 {
		t.Fatalf("stored %+v", st)
	}
	before, _ := e.Service(ctx, "one")

	// Same config again: nothing to write.
	commits := mem.Commits()
	if err := e.SyncConfig(ctx, cfgPools, []lb.ServiceSpec{one, two}); err != nil {
		t.Fatal(err)
	}
	if mem.Commits() != commits {
		t.Fatal("an unchanged config was written")
	}

	// "two" dropped, "one" changed (its VIP must not change), "three"
	// requests the API service's VIP: pending, and the reload still applies.
	one.Backends = []lb.BackendSpec{{Addr: addr("198.51.100.50"), Weight: 1}}
	three := svc("three", 80)
	three.VIPs = []netip.Addr{addr("198.51.100.1")}
	if err := e.SyncConfig(ctx, cfgPools, []lb.ServiceSpec{one, three}); err != nil {
		t.Fatal(err)
	}
	svcs, _ := e.Services(ctx)
	var names []string
	for _, s := range svcs {
		names = append(names, s.Spec.Name)
	}
	if fmt.Sprint(names) != "[api-svc one three]" {
		t.Fatalf("services %v", names)
	}
	after, _ := e.Service(ctx, "one")
	if !reflect.DeepEqual(before.VIPs, after.VIPs) || len(after.Spec.Backends) != 1 {
		t.Fatalf("one: %+v → %+v", before, after)
	}
	th, _ := e.Service(ctx, "three")
	if th.Pending == "" || !strings.Contains(th.Pending, `"api-svc"`) {
		t.Fatalf("three: %+v", th)
	}
	// Deleting the API service lets the config one have its VIP.
	if err := e.DeleteService(ctx, "api-svc"); err != nil {
		t.Fatal(err)
	}
	th, _ = e.Service(ctx, "three")
	if th.Pending != "" || th.VIPs[0] != addr("198.51.100.1") {
		t.Fatalf("three: %+v", th)
	}

	// A reload that would shrink a pool under an address in use is refused whole.
	err := e.SyncConfig(ctx, []lb.Pool{mustPool(t, "cfg", true, "192.0.2.8/29")}, []lb.ServiceSpec{one, three})
	var ce *lb.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("shrinking reload: %v", err)
	}
	// An invalid service fails the reload with its field.
	bad := svc("bad", 0)
	err = e.SyncConfig(ctx, cfgPools, []lb.ServiceSpec{one, three, bad})
	var fe *lb.FieldError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("bad service: %v", err)
	}
	// Dropping everything from the file: config items go, the API pool stays.
	if err := e.SyncConfig(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	pools, _ := e.Pools(ctx)
	if len(pools) != 1 || pools[0].Name != "api-pool" {
		t.Fatalf("pools %+v", pools)
	}
	st, _ = mem.Load()
	if len(st.Services)+len(st.Assignments) != 0 || len(st.Pools) != 1 {
		t.Fatalf("stored %+v", st)
	}
}

func TestSharingThroughTheEngine(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/29")); err != nil {
		t.Fatal(err)
	}
	dnsTCP, dnsUDP := svc("dns-tcp", 53), svc("dns-udp", 53)
	dnsUDP.Ports[0].Protocol = proxy.UDP
	dnsTCP.SharingKey, dnsUDP.SharingKey = "dns", "dns"
	a, _, err := e.PutService(ctx, dnsTCP)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := e.PutService(ctx, dnsUDP)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.VIPs, b.VIPs) {
		t.Fatalf("not shared: %v %v", a.VIPs, b.VIPs)
	}
	if d := e.Desired(); len(d.VIPs) != 1 || len(d.Dataplane.Services) != 2 {
		t.Fatalf("desired %+v", d)
	}
}

// Version moves with every change a reader could see (the web UI skips
// re-encoding while it holds) and stays put for a refused change.
func TestVersionMovesWithState(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	v0 := e.Version()
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/30")); err != nil {
		t.Fatal(err)
	}
	v1 := e.Version()
	if v1 == v0 {
		t.Fatal("a new pool did not move the version")
	}
	if _, err := e.CreatePool(ctx, mustPool(t, "q", true, "192.0.2.1/32")); err == nil {
		t.Fatal("an overlapping pool was accepted")
	}
	if e.Version() != v1 {
		t.Fatal("a refused change moved the version")
	}
	if _, _, err := e.PutService(ctx, svc("web", 80, "198.51.100.2")); err != nil {
		t.Fatal(err)
	}
	v2 := e.Version()
	if v2 == v1 {
		t.Fatal("a new service did not move the version")
	}
	if err := e.SetBackendHealth(ctx, "web", netip.MustParseAddrPort("198.51.100.2:80"), false); err != nil {
		t.Fatal(err)
	}
	if e.Version() == v2 {
		t.Fatal("a health change did not move the version")
	}
}

// Desired carries the health targets of services with a check, so the
// daemon's checker needs no listing of every service per change.
func TestDesiredHealthTargets(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/30")); err != nil {
		t.Fatal(err)
	}
	web := svc("web", 80, "198.51.100.2", "198.51.100.3")
	web.Health = &lb.HealthCheck{Type: "tcp", Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
	for _, s := range []lb.ServiceSpec{web, svc("plain", 81, "198.51.100.4")} {
		if _, _, err := e.PutService(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := e.Desired().Health, web.HealthTargets(); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Fatalf("health targets %+v, want %+v", got, want)
	}
	if err := e.DeleteService(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if got := e.Desired().Health; len(got) != 0 {
		t.Fatalf("after delete: %+v", got)
	}
}

// A change whose store commit fails leaves nothing behind: not in the
// published state, not in the render cache. Here: web's new backends are
// refused by the store, then another service is added — web must still
// render with its old backends.
func TestRefusedCommitLeavesNoRender(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.PutService(ctx, svc("web", 80, "198.51.100.2")); err != nil {
		t.Fatal(err)
	}
	before := e.Desired()
	mem.FailCommits(errors.New("disk full"))
	if _, _, err := e.PutService(ctx, svc("web", 80, "198.51.100.99")); err == nil {
		t.Fatal("the store refused the change, yet PutService succeeded")
	}
	mem.FailCommits(nil)
	if !reflect.DeepEqual(before, e.Desired()) {
		t.Fatal("a refused change was published")
	}
	if _, _, err := e.PutService(ctx, svc("other", 81, "198.51.100.3")); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.Desired().Dataplane.Services {
		for _, b := range s.Backends {
			if b.Addr.Addr() == addr("198.51.100.99") {
				t.Fatalf("%s renders the refused backend %s", s.Name, b.Addr)
			}
		}
	}
	checkRenderCache(t, e)
}
