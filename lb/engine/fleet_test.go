package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// fleet starts n engines, each on its own handle of one shared fake store.
func fleet(t *testing.T, n int, opts Options) (*store.SharedMem, []*Engine) {
	t.Helper()
	sm := store.NewSharedMem()
	opts.Fleet = true
	var out []*Engine
	for range n {
		out = append(out, start(t, sm.Handle(), opts))
	}
	return sm, out
}

// converge waits until every engine shows the same services and addresses.
func converge(t *testing.T, es []*Engine) map[string][]netip.Addr {
	t.Helper()
	view := func(e *Engine) map[string][]netip.Addr {
		ss, err := e.Services(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]netip.Addr{}
		for _, s := range ss {
			out[s.Spec.Name] = s.VIPs
		}
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		first := view(es[0])
		same := true
		for _, e := range es[1:] {
			same = same && fmt.Sprint(view(e)) == fmt.Sprint(first)
		}
		if same {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("engines did not converge")
		}
	}
}

// TestSharedEnginesNeverShareAnAddress: three engines on one shared store,
// 30 writers each creating services at once through all three: every write
// succeeds (lost races are retried from fresh state), no address is given
// twice, and every engine ends with the same state.
func TestSharedEnginesNeverShareAnAddress(t *testing.T) {
	// Deterministic: an operation loses a race only to another's commit,
	// and there are 91 commits in all, so 100 retries always suffice.
	_, es := fleet(t, 3, Options{StaleRetries: 100})
	if _, err := es[0].CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 90)
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				s := svc(fmt.Sprintf("s%d-%d", w, i), 80, "198.51.100.1")
				if _, _, err := es[(w+i)%3].PutService(ctx, s); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write: %v", err)
	}
	view := converge(t, es)
	holder := map[netip.Addr]string{}
	for name, ips := range view {
		if len(ips) != 1 {
			t.Errorf("%s: %v", name, ips)
		}
		for _, ip := range ips {
			if o, ok := holder[ip]; ok {
				t.Errorf("%s given to %s and %s", ip, o, name)
			}
			holder[ip] = name
		}
	}
	if len(view) != 90 {
		t.Errorf("%d services, want 90", len(view))
	}
}

// TestSharedStoreDown: writes are refused with ErrUnavailable (nothing
// changes), reads go on; after recovery a change made meanwhile elsewhere
// is taken in.
func TestSharedStoreDown(t *testing.T) {
	sm, es := fleet(t, 2, Options{})
	if _, err := es[0].CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if ps, _ := es[1].Pools(ctx); len(ps) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway 2 never saw the pool")
		}
	}
	sm.SetDown(errors.New("no quorum"))
	if _, _, err := es[1].PutService(ctx, svc("a", 80, "198.51.100.1")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write while down: %v, want ErrUnavailable", err)
	}
	if ps, err := es[1].Pools(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("read while down: %v %v", ps, err)
	}
	sm.SetDown(nil)
	if _, _, err := es[0].PutService(ctx, svc("a", 80, "198.51.100.1")); err != nil {
		t.Fatal(err)
	}
	if v := converge(t, es); len(v["a"]) != 1 {
		t.Fatalf("after recovery: %v", v)
	}
}

// TestSharedConfigSeeds: a config file seeds what the store lacks, never
// overwrites what it holds (a disagreement shows on the service), never
// deletes what it does not list; REST may change seeded services.
func TestSharedConfigSeeds(t *testing.T) {
	_, es := fleet(t, 2, Options{})
	p := mustPool(t, "p", true, "192.0.2.0/28")
	web := svc("web", 80, "198.51.100.1")
	if err := es[0].SyncConfig(ctx, []lb.Pool{p}, []lb.ServiceSpec{web}); err != nil {
		t.Fatal(err)
	}
	// Gateway 2's file: web with another backend, and no "api" it never had.
	other := svc("web", 80, "198.51.100.9")
	if err := es[1].SyncConfig(ctx, []lb.Pool{p}, []lb.ServiceSpec{other}); err != nil {
		t.Fatal(err)
	}
	s1, err := es[1].Service(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if s1.Spec.Backends[0].Addr != addr("198.51.100.1") || !strings.Contains(s1.Failed, "config file differs") {
		t.Fatalf("gateway 2 sees %v, failed %q: want the stored backend kept and the disagreement shown", s1.Spec.Backends, s1.Failed)
	}
	if s0, _ := es[0].Service(ctx, "web"); s0.Failed != "" {
		t.Fatalf("gateway 1 agrees, yet: %q", s0.Failed)
	}
	// A file without web deletes nothing.
	if err := es[1].SyncConfig(ctx, []lb.Pool{p}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := es[0].Service(ctx, "web"); err != nil {
		t.Fatalf("web gone after a file without it: %v", err)
	}
	// REST owns the fleet's state: it may delete a seeded service.
	if err := es[1].DeleteService(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if v := converge(t, es); len(v) != 0 {
		t.Fatalf("after DELETE: %v", v)
	}
}

// deafHandle is a gateway whose store never signals a change: its view
// lags every other gateway's commits until something makes it read.
type deafHandle struct{ *store.SharedHandle }

func (deafHandle) Changed() <-chan struct{} { return nil }

// TestSharedRefusalsConfirmed (issue 35): in a fleet, a 404 or 409 read
// from a gateway's own view is confirmed with the store. A gateway whose
// view lags deletes (and updates) a service another gateway created, where
// its view alone said 404; without quorum every write, DELETE of a name it
// does not know included, is ErrUnavailable (503), never a 404 from a view
// that cannot be confirmed; back with quorum, a name nobody has is 404.
func TestSharedRefusalsConfirmed(t *testing.T) {
	sm := store.NewSharedMem()
	a := start(t, sm.Handle(), Options{Fleet: true})
	b := start(t, deafHandle{sm.Handle()}, Options{Fleet: true})
	if _, err := a.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y"} {
		if _, _, err := a.PutService(ctx, svc(n, 80, "198.51.100.1")); err != nil {
			t.Fatal(err)
		}
	}
	if ss, _ := b.Services(ctx); len(ss) != 0 {
		t.Fatalf("b's view should lag (it is never signalled): %v", ss)
	}
	if err := b.DeleteService(ctx, "x"); err != nil {
		t.Fatalf("DELETE x through the lagging gateway: %v", err)
	}

	sm.SetDown(errors.New("no quorum"))
	for what, err := range map[string]error{
		"DELETE of a name nobody has": b.DeleteService(ctx, "nobody"),
		"DELETE of a known service":   b.DeleteService(ctx, "y"),
		"DELETE of a pool":            b.DeletePool(ctx, "nopool"),
		"PUT":                         func() error { _, _, err := b.PutService(ctx, svc("z", 80, "198.51.100.1")); return err }(),
	} {
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, lb.ErrNotFound) {
			t.Errorf("%s without quorum: %v, want ErrUnavailable only", what, err)
		}
	}
	sm.SetDown(nil)
	if err := b.DeleteService(ctx, "nobody"); !errors.Is(err, lb.ErrNotFound) {
		t.Errorf("DELETE of a name nobody has, with quorum: %v, want ErrNotFound", err)
	}
	if err := a.DeleteService(ctx, "y"); err != nil {
		t.Errorf("DELETE y after recovery: %v", err)
	}
}
