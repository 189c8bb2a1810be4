package webui

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// fakeManager is an in-memory lb.Manager that refuses what the engine
// refuses, with the same error types: *lb.FieldError for bad input,
// lb.ErrNotFound, *lb.ConflictError for overlaps, names in use and
// addresses in use.
type fakeManager struct {
	mu       sync.Mutex
	pools    map[string]lb.Pool
	services map[string]lb.ServiceStatus
	owner    map[netip.Addr]string // assigned address → service
	calls    int                   // write calls that reached the manager
	onWrite  func(context.Context) // when set, sees a DeletePool's context
}

func newFakeManager() *fakeManager {
	return &fakeManager{pools: map[string]lb.Pool{}, services: map[string]lb.ServiceStatus{}, owner: map[netip.Addr]string{}}
}

func (m *fakeManager) status(p lb.Pool) lb.PoolStatus {
	size := new(bigInt)
	for _, r := range p.Ranges {
		size.add(r)
	}
	used := 0
	for a := range m.owner {
		if p.Contains(a) {
			used++
		}
	}
	return lb.PoolStatus{Pool: p, Size: size.capped(), Used: used}
}

// bigInt sums range sizes, capping at MaxUint64 as the contract says.
type bigInt struct{ n uint64 }

func (b *bigInt) add(r lb.Range) {
	s := r.Size()
	if !s.IsUint64() || b.n+s.Uint64() < b.n {
		b.n = math.MaxUint64
		return
	}
	b.n += s.Uint64()
}
func (b *bigInt) capped() uint64 { return b.n }

func (m *fakeManager) Pools(ctx context.Context) ([]lb.PoolStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []lb.PoolStatus
	for _, p := range m.pools {
		out = append(out, m.status(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *fakeManager) Pool(ctx context.Context, name string) (lb.PoolStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pools[name]
	if !ok {
		return lb.PoolStatus{}, fmt.Errorf("pool %q: %w", name, lb.ErrNotFound)
	}
	return m.status(p), nil
}

func (m *fakeManager) others() []lb.Pool {
	var out []lb.Pool
	for _, p := range m.pools {
		out = append(out, p)
	}
	return out
}

func (m *fakeManager) CreatePool(ctx context.Context, p lb.Pool) (lb.PoolStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if err := p.Validate(); err != nil {
		return lb.PoolStatus{}, err
	}
	if _, ok := m.pools[p.Name]; ok {
		return lb.PoolStatus{}, &lb.ConflictError{Field: "name", Value: p.Name, Reason: fmt.Sprintf("pool %q already exists", p.Name)}
	}
	if err := lb.CheckOverlap(&p, m.others()); err != nil {
		return lb.PoolStatus{}, err
	}
	m.pools[p.Name] = p
	return m.status(p), nil
}

func (m *fakeManager) UpdatePool(ctx context.Context, p lb.Pool) (lb.PoolStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	old, ok := m.pools[p.Name]
	if !ok {
		return lb.PoolStatus{}, fmt.Errorf("pool %q: %w", p.Name, lb.ErrNotFound)
	}
	if err := p.Validate(); err != nil {
		return lb.PoolStatus{}, err
	}
	if err := lb.CheckOverlap(&p, m.others()); err != nil {
		return lb.PoolStatus{}, err
	}
	for a, svc := range m.owner {
		if old.Contains(a) && !p.Usable(a) {
			return lb.PoolStatus{}, &lb.ConflictError{Field: "addresses", Value: a.String(),
				Reason: fmt.Sprintf("address %s is assigned to service %q and would leave pool %q", a, svc, p.Name)}
		}
	}
	m.pools[p.Name] = p
	return m.status(p), nil
}

func (m *fakeManager) DeletePool(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.onWrite != nil {
		m.onWrite(ctx)
	}
	p, ok := m.pools[name]
	if !ok {
		return fmt.Errorf("pool %q: %w", name, lb.ErrNotFound)
	}
	for a, svc := range m.owner {
		if p.Contains(a) {
			return &lb.ConflictError{Field: "name", Value: name,
				Reason: fmt.Sprintf("pool %q still has address %s assigned to service %q", name, a, svc)}
		}
	}
	delete(m.pools, name)
	return nil
}

func (m *fakeManager) Services(ctx context.Context) ([]lb.ServiceStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []lb.ServiceStatus
	for _, s := range m.services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

func (m *fakeManager) Service(ctx context.Context, name string) (lb.ServiceStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.services[name]
	if !ok {
		return lb.ServiceStatus{}, fmt.Errorf("service %q: %w", name, lb.ErrNotFound)
	}
	return s, nil
}

func (m *fakeManager) PutService(ctx context.Context, s lb.ServiceSpec) (lb.ServiceStatus, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	old, exists := m.services[s.Name]
	if s.Pool != "" {
		if _, ok := m.pools[s.Pool]; !ok {
			return lb.ServiceStatus{}, false, &lb.FieldError{Field: "pool", Value: s.Pool, Err: fmt.Errorf("no such pool: %w", lb.ErrNotFound)}
		}
	}
	st := lb.ServiceStatus{Spec: s}
	for i, v := range s.VIPs {
		if o, taken := m.owner[v]; taken && o != s.Name {
			return lb.ServiceStatus{}, false, &lb.ConflictError{Field: fmt.Sprintf("vips[%d]", i), Value: v.String(),
				Reason: fmt.Sprintf("%s is assigned to service %q", v, o)}
		}
		in := false
		for _, p := range m.pools {
			in = in || (p.Usable(v) && (s.Pool == "" || s.Pool == p.Name))
		}
		if !in {
			return lb.ServiceStatus{}, false, &lb.FieldError{Field: fmt.Sprintf("vips[%d]", i), Value: v.String(),
				Err: fmt.Errorf("not in any pool")}
		}
		st.VIPs = append(st.VIPs, v)
	}
	// A firewall-mark service holds no address (the engine allocates none).
	if len(s.VIPs) == 0 && s.FWMark == 0 {
		if len(old.VIPs) > 0 {
			st.VIPs = old.VIPs
		} else if a, ok := m.free(s.Pool); ok {
			st.VIPs = []netip.Addr{a}
		} else {
			st.Pending = "no address available"
		}
	}
	for _, v := range old.VIPs {
		delete(m.owner, v)
	}
	for _, v := range st.VIPs {
		m.owner[v] = s.Name
	}
	m.services[s.Name] = st
	return st, !exists, nil
}

func (m *fakeManager) free(pool string) (netip.Addr, bool) {
	names := make([]string, 0, len(m.pools))
	for n := range m.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := m.pools[n]
		if (pool == "" && !p.AutoAssign) || (pool != "" && pool != n) {
			continue
		}
		for _, r := range p.Ranges {
			for a := r.First; a.IsValid() && r.Contains(a); a = a.Next() {
				if _, taken := m.owner[a]; !taken && p.Usable(a) {
					return a, true
				}
			}
		}
	}
	return netip.Addr{}, false
}

func (m *fakeManager) DeleteService(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	s, ok := m.services[name]
	if !ok {
		return fmt.Errorf("service %q: %w", name, lb.ErrNotFound)
	}
	for _, v := range s.VIPs {
		delete(m.owner, v)
	}
	delete(m.services, name)
	return nil
}

// dump renders the whole store, to assert that a refused request changed nothing.
func (m *fakeManager) dump() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lines []string
	for _, p := range m.pools {
		lines = append(lines, fmt.Sprintf("pool %s %v auto=%v buggy=%v adv=%+v", p.Name, p.RangeStrings(), p.AutoAssign, p.AvoidBuggyIPs, p.Advertisement))
	}
	for _, s := range m.services {
		lines = append(lines, fmt.Sprintf("service %s %v %+v", s.Spec.Name, s.VIPs, s.Spec))
	}
	for a, o := range m.owner {
		lines = append(lines, fmt.Sprintf("owner %s %s", a, o))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// seed: pool "default" 192.0.2.0/24 (auto-assign), pool "v6" 2001:db8::/120,
// service "web" on 192.0.2.10:80 with three backends.
func (m *fakeManager) seed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for _, p := range []lb.Pool{
		{Name: "default", Ranges: []lb.Range{mustRange("192.0.2.0/24")}, AutoAssign: true},
		{Name: "v6", Ranges: []lb.Range{mustRange("2001:db8::/120")}},
	} {
		if _, err := m.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := m.PutService(ctx, webService()); err != nil {
		t.Fatal(err)
	}
	m.calls = 0
}

func webService() lb.ServiceSpec {
	return lb.ServiceSpec{Name: "web", VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Ports: []lb.PortSpec{{Name: "http", Port: 80, Protocol: proxy.TCP, TargetPort: 8080}},
		Backends: []lb.BackendSpec{
			{Addr: netip.MustParseAddr("198.51.100.2"), Weight: 1},
			{Addr: netip.MustParseAddr("198.51.100.3"), Weight: 1},
			{Addr: netip.MustParseAddr("198.51.100.4"), Weight: 2},
		}, Scheduler: proxy.WeightedRoundRobin, Method: proxy.NAT}
}

func mustRange(s string) lb.Range {
	r, err := lb.ParseRange(s)
	if err != nil {
		panic(err)
	}
	return r
}

// fakeFlows is a proxy.FlowSource driven by the test: Emit changes the
// table and tells every watcher.
type fakeFlows struct {
	mu       sync.Mutex
	flows    map[uint64]proxy.Flow
	watchers map[int]func(proxy.FlowEvent)
	next     int
	nextID   uint64
}

func newFakeFlows() *fakeFlows {
	return &fakeFlows{flows: map[uint64]proxy.Flow{}, watchers: map[int]func(proxy.FlowEvent){}}
}

func (f *fakeFlows) Snapshot(ctx context.Context) ([]proxy.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]proxy.Flow, 0, len(f.flows))
	for _, fl := range f.flows {
		out = append(out, fl)
	}
	return out, nil
}

// Watch reports the flows already there, then every Emit (the FlowSource
// contract; conntrack and IPVS do the same).
func (f *fakeFlows) Watch(ctx context.Context, fn func(proxy.FlowEvent)) error {
	f.mu.Lock()
	id := f.next
	f.next++
	f.watchers[id] = fn
	for _, fl := range f.flows {
		fn(proxy.FlowEvent{Type: proxy.FlowNew, Flow: fl})
	}
	f.mu.Unlock()
	<-ctx.Done()
	f.mu.Lock()
	delete(f.watchers, id)
	f.mu.Unlock()
	return nil
}

func (f *fakeFlows) Emit(ev proxy.FlowEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch ev.Type {
	case proxy.FlowDestroy:
		delete(f.flows, ev.Flow.ID)
	default:
		f.flows[ev.Flow.ID] = ev.Flow
	}
	for _, fn := range f.watchers {
		fn(ev)
	}
}

func (f *fakeFlows) newID() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	return f.nextID
}

// flowGen drives fakeFlows like traffic: rate new flows per second spread
// over the backends of one frontend, each growing its byte counters every
// tick and ending after lifetime.
type flowGen struct {
	src      *fakeFlows
	frontend netip.AddrPort
	backends []netip.AddrPort
	rate     float64
	lifetime time.Duration
	tick     time.Duration
	now      func() time.Time
}

func (g *flowGen) run(ctx context.Context) {
	if g.tick == 0 {
		g.tick = 100 * time.Millisecond
	}
	if g.now == nil {
		g.now = time.Now
	}
	type live struct {
		f   proxy.Flow
		end time.Time
	}
	var lives []live
	t := time.NewTicker(g.tick)
	defer t.Stop()
	start := g.now()
	made := 0
	port := uint16(20000)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := g.now()
		want := int(now.Sub(start).Seconds() * g.rate)
		for ; made < want; made++ {
			port++
			if port < 20000 {
				port = 20000
			}
			f := proxy.Flow{ID: g.src.newID(), Protocol: proxy.TCP,
				Client:   netip.AddrPortFrom(netip.MustParseAddr("203.0.113.7"), port),
				Frontend: g.frontend, Backend: g.backends[made%len(g.backends)],
				State: "ESTABLISHED", Start: time.Now(), OrigBytes: 80, OrigPackets: 1, ReplyBytes: 60, ReplyPackets: 1}
			g.src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: f})
			lives = append(lives, live{f: f, end: now.Add(g.lifetime)})
		}
		kept := lives[:0]
		for _, l := range lives {
			if now.After(l.end) {
				l.f.State = "TIME_WAIT"
				g.src.Emit(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: l.f})
				continue
			}
			kept = append(kept, l)
		}
		lives = kept
	}
}

// growBytes bumps every live flow's counters, like traffic on open connections.
func (f *fakeFlows) growBytes(in, out uint64) {
	f.mu.Lock()
	var evs []proxy.FlowEvent
	for id, fl := range f.flows {
		fl.OrigBytes += in
		fl.ReplyBytes += out
		fl.OrigPackets++
		fl.ReplyPackets++
		f.flows[id] = fl
		evs = append(evs, proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: fl})
	}
	fns := make([]func(proxy.FlowEvent), 0, len(f.watchers))
	for _, fn := range f.watchers {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	for _, ev := range evs {
		for _, fn := range fns {
			fn(ev)
		}
	}
}

type fakeReporter struct{ st announce.Status }

func (r fakeReporter) Status() announce.Status { return r.st }

const testToken = "s3cret-token"

// startServer runs a Server with the given fake manager over httptest,
// its loops stopped (and streams ended) before the test server closes.
func startServer(t testing.TB, m *fakeManager, mod func(*Options)) (*Server, *httptest.Server) {
	t.Helper()
	o := Options{Manager: m, Token: testToken, RateLimit: -1, PollInterval: 50 * time.Millisecond,
		BatchInterval: 50 * time.Millisecond,
		Reporters: []announce.Reporter{
			fakeReporter{announce.Status{Kind: "bgp", Peers: []announce.PeerState{{Name: "tor1", Address: "198.51.100.254", State: "Established"}}}},
			fakeReporter{announce.Status{Kind: "l2", Owned: []string{"192.0.2.10"}, Peers: []announce.PeerState{{Name: "gw-a", Address: "192.0.2.1", State: "alive"}}}},
		}}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	<-s.Primed()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		ts.Close()
	})
	return s, ts
}

type contextT = context.Context

type errString string

func (e errString) Error() string { return string(e) }
