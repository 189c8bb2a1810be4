package engine

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestConfigFileRule: a pool or service from the config file is refused by
// every REST write (409 naming the file) and nothing changes — on a fresh
// start, after a restart (bbolt reopened, before and after the file is
// applied again) and after a SIGHUP (SyncConfig). Removed from the file,
// the name is free for REST.
func TestConfigFileRule(t *testing.T) {
	const file = "/etc/edgelb/edgelb.yaml"
	path := filepath.Join(t.TempDir(), "edgelb.db")
	pool := mustPool(t, "file-pool", true, "192.0.2.0/24")
	web := svc("web", 80, "198.51.100.7")
	web.VIPs = []netip.Addr{addr("192.0.2.10")}

	// run starts an engine on the state file; stop closes both (a restart).
	run := func() (*Engine, func()) {
		st, err := store.OpenBolt(path, store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEngine(st, Options{ConfigFile: file})
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(c) }()
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
				st.Close()
			}
		}
		t.Cleanup(stop)
		return e, stop
	}
	refused := func(when string, err error) {
		t.Helper()
		if !errors.Is(err, lb.ErrConflict) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: got %v, want a conflict naming %s", when, err, file)
		} else {
			t.Logf("%s: 409 %v", when, err)
		}
	}
	holds := func(e *Engine, when string) {
		t.Helper()
		changed := web
		changed.Backends = append([]lb.BackendSpec(nil), changed.Backends...)
		changed.Backends[0].Weight = 7
		_, _, err := e.PutService(ctx, changed)
		refused(when+": PUT service", err)
		refused(when+": DELETE service", e.DeleteService(ctx, "web"))
		bigger := mustPool(t, "file-pool", true, "192.0.2.0/23")
		_, err = e.UpdatePool(ctx, bigger)
		refused(when+": PUT pool", err)
		refused(when+": DELETE pool", e.DeletePool(ctx, "file-pool"))
		st, err := e.Service(ctx, "web")
		if err != nil || st.Spec.Backends[0].Weight != 1 || len(st.VIPs) != 1 || st.VIPs[0] != addr("192.0.2.10") {
			t.Errorf("%s: web changed: %+v %v", when, st, err)
		}
	}

	e, stop := run()
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{web}); err != nil {
		t.Fatal(err)
	}
	holds(e, "start")
	// A REST service of another name is the API's to change.
	if _, created, err := e.PutService(ctx, svc("api-svc", 81, "198.51.100.8")); err != nil || !created {
		t.Fatalf("api service: %v", err)
	}
	if _, _, err := e.PutService(ctx, svc("api-svc", 82, "198.51.100.8")); err != nil {
		t.Fatalf("api service update: %v", err)
	}
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{web}); err != nil { // SIGHUP
		t.Fatal(err)
	}
	holds(e, "after SIGHUP")

	stop() // restart: the origin is persisted
	e, stop = run()
	holds(e, "after restart, before the file is applied")
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{web}); err != nil {
		t.Fatal(err)
	}
	holds(e, "after restart")

	// Removed from the file (SIGHUP): gone, and the name is free for REST.
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service(ctx, "web"); !errors.Is(err, lb.ErrNotFound) {
		t.Fatalf("web still there after leaving the file: %v", err)
	}
	if _, created, err := e.PutService(ctx, web); err != nil || !created {
		t.Fatalf("web over REST once the file dropped it: %v", err)
	}
	if err := e.DeleteService(ctx, "web"); err != nil {
		t.Fatalf("delete the REST web: %v", err)
	}
	stop()
}

// TestBackendIsNotAVIP: a backend that is a VIP (requested or assigned) is
// refused on the backend's field, naming the service holding it.
func TestBackendIsNotAVIP(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	a := svc("a", 80, "198.51.100.7")
	a.VIPs = []netip.Addr{addr("192.0.2.10")}
	if _, _, err := e.PutService(ctx, a); err != nil {
		t.Fatal(err)
	}
	auto := svc("auto", 80, "198.51.100.8") // gets an assigned VIP
	st, _, err := e.PutService(ctx, auto)
	if err != nil || len(st.VIPs) != 1 {
		t.Fatalf("auto: %+v %v", st, err)
	}
	for _, vip := range []netip.Addr{addr("192.0.2.10"), st.VIPs[0]} {
		b := svc("b", 80, vip.String())
		_, _, err := e.PutService(ctx, b)
		var fe *lb.FieldError
		if !errors.As(err, &fe) || fe.Field != "backends[0].address" || fe.Value != vip.String() {
			t.Errorf("backend %s: got %v, want a FieldError on backends[0].address", vip, err)
		} else {
			t.Logf("backend %s: %v", vip, err)
		}
	}
	if _, err := e.Service(ctx, "b"); !errors.Is(err, lb.ErrNotFound) {
		t.Errorf("b stored: %v", err)
	}
}
