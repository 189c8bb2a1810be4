package lb

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestPoolChangesNeverDuplicate (issue 13): the pool sequence that handed
// one address to four Services — a pool in use deleted while an
// overlapping pool waits, the overlapping pool then valid — and after it a
// shrink, an overlap-replace and a re-create. After every step, as a step
// table: no address has two owners that may not share, every held address
// counts in the pool that covers it, and new services get only free
// addresses.
func TestPoolChangesNeverDuplicate(t *testing.T) {
	a := NewAllocator()
	steps := []struct {
		name  string
		pools []Pool
		alloc int // new automatic services after the change
	}{
		{"default /28 in use", []Pool{pool(t, "default", true, false, "192.0.2.0/28")}, 10},
		{"default deleted; the overlapping wide /27 now valid", []Pool{pool(t, "wide", true, false, "192.0.2.0/27")}, 5},
		{"wide shrunk to .8-.31 (.0-.7 leave every pool)", []Pool{pool(t, "wide", true, false, "192.0.2.8-192.0.2.31")}, 3},
		{"wide replaced by two pools over the same addresses", []Pool{pool(t, "low", true, false, "192.0.2.0-192.0.2.15"), pool(t, "high", true, false, "192.0.2.16-192.0.2.31")}, 4},
		{"default re-created, low and high deleted", []Pool{pool(t, "default", true, false, "192.0.2.0/27")}, 4},
	}
	n := 0
	for _, st := range steps {
		orphans, err := a.ReplacePools(st.pools)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, failed := 0, 0
		for i := 0; i < st.alloc; i++ {
			svc := fmt.Sprintf("svc-%02d", n)
			n++
			if _, err := a.Allocate(svc, IPv4, Request{}); err != nil {
				failed++
				continue
			}
			got++
		}
		dups, counted := auditAllocator(a)
		t.Logf("%-55s orphans %2d, allocated %d (failed %d), held %2d, duplicates %d, usage %v", st.name, len(orphans), got, failed, len(a.ips), dups, counted)
		if dups > 0 {
			t.Fatalf("%s: %d addresses held by services that may not share them", st.name, dups)
		}
		for pool, c := range counted {
			if _, used := a.Usage(pool); used != c {
				t.Errorf("%s: pool %q reports %d used, %d held addresses lie in it", st.name, pool, used, c)
			}
		}
	}
}

// auditAllocator counts addresses with two owners that may not share (no
// sharing key) and the held addresses inside each pool's ranges.
func auditAllocator(a *Allocator) (dups int, inPool map[string]int) {
	inPool = map[string]int{}
	for ip, u := range a.ips {
		if len(u.owners) > 1 && u.key == "" {
			dups++
		}
		if p, ok := a.PoolOf(ip); ok {
			inPool[p]++
		}
	}
	for _, n := range a.names {
		if _, ok := inPool[n]; !ok {
			inPool[n] = 0
		}
	}
	_ = netip.Addr{}
	return dups, inPool
}
