package engine

import (
	"errors"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestStandalonePoolAllocation: the standalone writer keeps a pool's
// serviceAllocation priority (it orders automatic assignment; it survives
// a restart from the store) and refuses selectors, which no standalone
// service could match.
func TestStandalonePoolAllocation(t *testing.T) {
	st := store.NewMem()
	e := start(t, st, Options{})
	late := mustPool(t, "a-late", true, "192.0.2.0/29")
	first := mustPool(t, "z-first", true, "192.0.2.8/29")
	first.Allocation = &lb.ServiceAllocation{Priority: 1}
	for _, p := range []lb.Pool{late, first} {
		if _, err := e.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	st1, _, err := e.PutService(ctx, svc("web", 80, "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st1.VIPs) != 1 || !first.Contains(st1.VIPs[0]) {
		t.Fatalf("web got %v, want an address of z-first (priority 1 before a pool without serviceAllocation)", st1.VIPs)
	}
	bad := mustPool(t, "sel", true, "192.0.2.16/29")
	bad.Allocation = &lb.ServiceAllocation{Namespaces: []string{"blue"}}
	_, err = e.CreatePool(ctx, bad)
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field != "serviceAllocation.namespaces" || !errors.Is(err, lb.ErrStandaloneSelectors) {
		t.Fatalf("selectors in standalone: %v", err)
	}
	// The store keeps the allocation: a restarted engine reads it back.
	e2 := start(t, st, Options{})
	p, err := e2.Pool(ctx, "z-first")
	if err != nil || p.Allocation == nil || p.Allocation.Priority != 1 {
		t.Fatalf("after restart: %+v %v", p.Allocation, err)
	}
}
