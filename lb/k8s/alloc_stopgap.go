package k8s

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/edgelb/edgelb/lb"
)

// stopgapAllocator is a small allocator with lb's semantics, used until the
// controller is wired to lb's allocator. It scans linearly: fine for
// thousands of Services, not for huge pools that are nearly full.
type stopgapAllocator struct {
	pools  []lb.Pool
	owners map[netip.Addr]map[string]lb.Request // ip → svc → its request
	held   map[string][]netip.Addr
}

func newStopgapAllocator() Allocator {
	return &stopgapAllocator{owners: map[netip.Addr]map[string]lb.Request{}, held: map[string][]netip.Addr{}}
}

func (a *stopgapAllocator) ReplacePools(pools []lb.Pool) ([]lb.Orphan, error) {
	a.pools = append([]lb.Pool(nil), pools...)
	var out []lb.Orphan
	for ip, owners := range a.owners {
		if _, ok := a.PoolOf(ip); !ok {
			for svc := range owners {
				out = append(out, lb.Orphan{Service: svc, IP: ip})
			}
		}
	}
	return out, nil
}

func (a *stopgapAllocator) PoolOf(ip netip.Addr) (string, bool) {
	for i := range a.pools {
		if a.pools[i].Contains(ip) {
			return a.pools[i].Name, true
		}
	}
	return "", false
}

func (a *stopgapAllocator) pool(name string) *lb.Pool {
	for i := range a.pools {
		if a.pools[i].Name == name {
			return &a.pools[i]
		}
	}
	return nil
}

// canShare: every other holder has the same non-empty key and disjoint ports.
func (a *stopgapAllocator) canShare(svc string, ip netip.Addr, req lb.Request) error {
	for other, oreq := range a.owners[ip] {
		if other == svc {
			continue
		}
		if req.SharingKey == "" || oreq.SharingKey != req.SharingKey {
			return &lb.ConflictError{Field: "ip", Value: ip.String(),
				Reason: fmt.Sprintf("address %s is in use by %s", ip, other)}
		}
		for _, p := range req.Ports {
			for _, q := range oreq.Ports {
				if p == q {
					return &lb.ConflictError{Field: "ip", Value: ip.String(),
						Reason: fmt.Sprintf("address %s is shared with %s, which also uses port %d/%s", ip, other, p.Port, p.Protocol)}
				}
			}
		}
	}
	return nil
}

func (a *stopgapAllocator) Assign(svc string, ip netip.Addr, req lb.Request) error {
	ip = ip.Unmap()
	var in *lb.Pool
	if req.Pool != "" {
		in = a.pool(req.Pool)
		if in == nil {
			return &lb.FieldError{Field: "pool", Value: req.Pool, Err: lb.ErrNotFound}
		}
		if !in.Usable(ip) {
			return &lb.FieldError{Field: "ip", Value: ip.String(), Err: fmt.Errorf("not in pool %q", req.Pool)}
		}
	} else {
		for i := range a.pools {
			if a.pools[i].Usable(ip) {
				in = &a.pools[i]
			}
		}
		if in == nil {
			return &lb.FieldError{Field: "ip", Value: ip.String(), Err: fmt.Errorf("not in any pool")}
		}
	}
	if err := a.canShare(svc, ip, req); err != nil {
		return err
	}
	if a.owners[ip] == nil {
		a.owners[ip] = map[string]lb.Request{}
	}
	if _, had := a.owners[ip][svc]; !had {
		a.held[svc] = append(a.held[svc], ip)
	}
	a.owners[ip][svc] = req
	return nil
}

func (a *stopgapAllocator) Allocate(svc string, fam lb.Family, req lb.Request) (netip.Addr, error) {
	var cands []*lb.Pool
	if req.Pool != "" {
		p := a.pool(req.Pool)
		if p == nil {
			return netip.Addr{}, &lb.FieldError{Field: "pool", Value: req.Pool, Err: lb.ErrNotFound}
		}
		cands = append(cands, p)
	} else {
		for i := range a.pools {
			if a.pools[i].AutoAssign {
				cands = append(cands, &a.pools[i])
			}
		}
	}
	// Prefer joining an address already shared under the same key.
	if req.SharingKey != "" {
		for ip := range a.owners {
			if familyOf(ip) != fam {
				continue
			}
			for _, p := range cands {
				if p.Usable(ip) && a.canShare(svc, ip, req) == nil {
					return ip, a.Assign(svc, ip, req)
				}
			}
		}
	}
	for _, p := range cands {
		for _, r := range p.Ranges {
			if familyOf(r.First) != fam {
				continue
			}
			for ip := r.First; ip.IsValid() && r.Contains(ip); ip = ip.Next() {
				if len(a.owners[ip]) == 0 && p.Usable(ip) {
					return ip, a.Assign(svc, ip, lb.Request{Pool: p.Name, SharingKey: req.SharingKey, Ports: req.Ports})
				}
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("allocate %s for %s: %w", fam, svc, lb.ErrExhausted)
}

func (a *stopgapAllocator) Release(svc string, ip netip.Addr) {
	if o := a.owners[ip]; o != nil {
		delete(o, svc)
		if len(o) == 0 {
			delete(a.owners, ip)
		}
	}
	h := a.held[svc][:0]
	for _, x := range a.held[svc] {
		if x != ip {
			h = append(h, x)
		}
	}
	if len(h) == 0 {
		delete(a.held, svc)
	} else {
		a.held[svc] = h
	}
}

func (a *stopgapAllocator) ReleaseAll(svc string) {
	for _, ip := range append([]netip.Addr(nil), a.held[svc]...) {
		a.Release(svc, ip)
	}
}

func (a *stopgapAllocator) IPs(svc string) []netip.Addr {
	out := append([]netip.Addr(nil), a.held[svc]...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Is4() != out[j].Is4() {
			return out[i].Is4()
		}
		return out[i].Less(out[j])
	})
	return out
}

func (a *stopgapAllocator) Used(pool string) int {
	p := a.pool(pool)
	if p == nil {
		return 0
	}
	n := 0
	for ip := range a.owners {
		if p.Contains(ip) {
			n++
		}
	}
	return n
}
