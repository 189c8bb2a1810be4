package engine

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestRestartRestoresFirst: an assignment stored for a service sorted late
// is restored before a pending service sorted early allocates, so the
// restart steals nothing.
func TestRestartRestoresFirst(t *testing.T) {
	st := store.NewState()
	st.Pools["p"] = store.Pool{Pool: mustPool(t, "p", true, "192.0.2.0/31"), Origin: store.OriginAPI}
	for _, n := range []string{"a-new", "z-old"} {
		s := svc(n, 80)
		lb.NormalizeService(&s)
		st.Services[n] = store.Service{Spec: s, Origin: store.OriginAPI}
	}
	st.Assignments["z-old"] = []netip.Addr{addr("192.0.2.0")}
	st.Assignments["gone"] = []netip.Addr{addr("192.0.2.1")} // no such service: cleaned up
	mem := store.NewMemFrom(st)
	e := start(t, mem, Options{})
	old, _ := e.Service(ctx, "z-old")
	nw, _ := e.Service(ctx, "a-new")
	if old.VIPs[0] != addr("192.0.2.0") || nw.VIPs[0] != addr("192.0.2.1") {
		t.Fatalf("z-old %v, a-new %v", old.VIPs, nw.VIPs)
	}
	got, _ := mem.Load()
	if _, ok := got.Assignments["gone"]; ok || got.Assignments["a-new"][0] != addr("192.0.2.1") {
		t.Fatalf("stored assignments %v", got.Assignments)
	}
}

func TestRestartWithBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *store.Bolt {
		b, err := store.OpenBolt(path, store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	e, err := NewEngine(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(c) }()
	for _, p := range []lb.Pool{mustPool(t, "v4", true, "192.0.2.0/24"), mustPool(t, "v6", true, "2001:db8::/64"), mustPool(t, "man", false, "198.51.100.0/24")} {
		if _, err := e.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 120; i++ {
		s := svc(fmt.Sprint("s", i), 80)
		switch i % 4 {
		case 1:
			s.Families = []lb.Family{lb.IPv4, lb.IPv6}
		case 2:
			s.VIPs = []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(i)})}
		case 3:
			s.Pool = "man"
		}
		if _, _, err := e.PutService(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Some churn so the allocation cursor is not where a fresh start puts it.
	for i := 0; i < 120; i += 10 {
		if err := e.DeleteService(ctx, fmt.Sprint("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := e.Services(ctx)
	desired := e.Desired()
	cancel()
	<-done
	b.Close()

	b = open()
	defer b.Close()
	e2 := start(t, b, Options{})
	after, _ := e2.Services(ctx)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("services changed across the restart")
	}
	if !reflect.DeepEqual(desired, e2.Desired()) {
		t.Fatal("desired state changed across the restart")
	}
	n := 0
	for _, s := range after {
		n += len(s.VIPs)
	}
	t.Logf("%d services, %d assignments identical after reopen", len(after), n)
}
