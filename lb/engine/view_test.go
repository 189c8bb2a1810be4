package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// gatedStore holds every Commit until the test lets it through: a write
// stuck on its store, as one retrying against etcd is.
type gatedStore struct {
	*store.Mem
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) Commit(c store.Change) error {
	g.entered <- struct{}{}
	<-g.release
	return g.Mem.Commit(c)
}

// Reads do not queue behind a write: while a PutService waits on its store,
// Services, Service, Pools and Pool answer at once, with the state before
// it; once the write returns, its caller reads it.
func TestReadsDoNotWaitForWrites(t *testing.T) {
	mem := store.NewMem()
	seed := start(t, mem, Options{})
	if _, err := seed.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := seed.PutService(ctx, svc("old", 80, "198.51.100.2")); err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Mem: mem, entered: make(chan struct{}), release: make(chan struct{})}
	e := start(t, g, Options{})

	done := make(chan error, 1)
	go func() {
		_, _, err := e.PutService(ctx, svc("new", 81, "198.51.100.3"))
		done <- err
	}()
	<-g.entered // the write holds the engine goroutine now

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a blocked read would wait for ever
	defer cancel()
	svcs, err := e.Services(rctx)
	if err != nil || len(svcs) != 1 || svcs[0].Spec.Name != "old" {
		t.Fatalf("Services during a write = %v, %v; want the state before it (old only)", svcs, err)
	}
	if _, err := e.Service(rctx, "new"); !errors.Is(err, lb.ErrNotFound) {
		t.Fatalf("Service(new) during its write = %v, want not found", err)
	}
	if s, err := e.Service(rctx, "old"); err != nil || len(s.VIPs) != 1 {
		t.Fatalf("Service(old) = %+v, %v", s, err)
	}
	if p, err := e.Pool(rctx, "p"); err != nil || p.Used != 1 {
		t.Fatalf("Pool during a write = %+v, %v; want 1 address used", p, err)
	}
	if ps, err := e.Pools(rctx); err != nil || len(ps) != 1 {
		t.Fatalf("Pools during a write = %v, %v", ps, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the write returned (%v) before its store commit", err)
	default:
	}

	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s, err := e.Service(ctx, "new"); err != nil || len(s.VIPs) != 1 {
		t.Fatalf("the writer does not read its own write: %+v, %v", s, err)
	}
	if p, _ := e.Pool(ctx, "p"); p.Used != 2 {
		t.Fatalf("pool after the write: %d used, want 2", p.Used)
	}
}

// A view, once published, never changes: every later operation (puts,
// deletes, refusals, a pool change) swaps in new values instead of writing
// into the ones a reader may hold. (Under the race detector,
// TestConcurrentCallers would also catch such a write while reads run.)
func TestViewNeverChangesOnceTaken(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/28")); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, _, err := e.PutService(ctx, svc(fmt.Sprint("s", i), 80, "198.51.100.2")); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SetRefused(ctx, map[string]string{"s1/80": "refused by the dataplane"}); err != nil {
		t.Fatal(err)
	}
	v := e.view.Load()
	before := describe(v)

	if _, _, err := e.PutService(ctx, svc("s0", 80, "198.51.100.9")); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteService(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.PutService(ctx, svc("s4", 81, "198.51.100.2")); err != nil {
		t.Fatal(err)
	}
	if err := e.SetRefused(ctx, map[string]string{"s3/80": "another reason"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.UpdatePool(ctx, mustPool(t, "p", true, "192.0.2.0/27")); err != nil {
		t.Fatal(err)
	}
	if after := describe(v); !reflect.DeepEqual(before, after) {
		t.Fatalf("a published view changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if reflect.DeepEqual(before, describe(e.view.Load())) {
		t.Fatal("the operations changed nothing: the test proves nothing")
	}
}

// describe is everything a read can return from v.
func describe(v *view) []any {
	var out []any
	for _, n := range store.Names(v.pools) {
		out = append(out, v.poolStatus(n))
	}
	for _, n := range store.Names(v.svcs) {
		out = append(out, v.serviceStatus(n))
	}
	return out
}

// A poller that reads Version and then the lists — the web UI does, and
// re-reads only when the version moves — never holds lists older than the
// version it read (review of the view: the version once moved with the
// Desired, before the view; 181 of 300 puts left such a poller stale).
func TestVersionNeverAheadOfView(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "10.0.0.0/16")); err != nil {
		t.Fatal(err)
	}
	type obs struct {
		version uint64
		n       int
	}
	stop := make(chan struct{})
	seen := make(chan []obs)
	go func() {
		var out []obs
		for {
			select {
			case <-stop:
				seen <- out
				return
			default:
			}
			v := e.Version()
			svcs, err := e.Services(ctx)
			if err != nil {
				t.Error(err)
			}
			out = append(out, obs{v, len(svcs)})
		}
	}()
	after := map[uint64]int{} // version after each put → services then
	for i := range 300 {
		if _, _, err := e.PutService(ctx, svc(fmt.Sprint("s", i), 80, "198.51.100.2")); err != nil {
			t.Fatal(err)
		}
		after[e.Version()] = i + 1
	}
	close(stop)
	stale := 0
	for _, o := range <-seen {
		if want, ok := after[o.version]; ok && o.n < want {
			stale++
		}
	}
	if stale > 0 {
		t.Fatalf("%d reads got fewer services than the version they read had", stale)
	}
}
