package engine

import (
	"net/netip"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestAllocationOrderOption (issue 37): standalone services get the lowest
// free address by default; Options.AllocationOrder lb.Rotate (config
// allocation.order: rotate) keeps the earlier order, which reuses a
// released address last.
func TestAllocationOrderOption(t *testing.T) {
	for _, c := range []struct {
		order lb.AllocOrder
		want  string // b's address after a, on .0, was deleted
	}{{lb.LowestFree, "192.0.2.0"}, {lb.Rotate, "192.0.2.1"}} {
		e := start(t, store.NewMem(), Options{AllocationOrder: c.order})
		if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/29")); err != nil {
			t.Fatal(err)
		}
		put := func(name string) []netip.Addr {
			st, _, err := e.PutService(ctx, svc(name, 80))
			if err != nil {
				t.Fatal(err)
			}
			return st.VIPs
		}
		put("a")
		if err := e.DeleteService(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got := put("b"); len(got) != 1 || got[0] != addr(c.want) {
			t.Errorf("%v: b got %v, want %s", c.order, got, c.want)
		}
	}
}
