package lb

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Allocator hands out VIPs from pools and accepts requested ones. It is
// pure (no kernel, no clock, no goroutines) and not safe for concurrent use:
// its owner (the engine, the Kubernetes controller) serializes calls.
//
// A service holds at most one address per family. Several services may
// hold the same address when they all carry the same non-empty sharing key
// and their ports are pairwise disjoint (MetalLB's rule).
type Allocator struct {
	pools  map[string]*poolState
	names  []string      // pool names, sorted
	order  []string      // pool names in auto-assign order (autoOrder)
	ranges []*rangeState // every range, sorted by family then first address
	ips    map[netip.Addr]*ipUse
	held   map[string][]netip.Addr
	// shared indexes addresses by sharing key, so Allocate finds an address
	// to join without scanning every assignment.
	shared map[string]map[netip.Addr]struct{}
	seq    AllocOrder // how Allocate picks inside a range
}

// AllocOrder is how Allocate picks among the free addresses of a range
// (pools and ranges are always tried in the same order: autoOrder, then
// each pool's ranges by address).
type AllocOrder int

const (
	// LowestFree hands out the lowest free address, as MetalLB does: the
	// default, so an address a Service may request later stays free while
	// lower ones are (a pool fills from the bottom).
	LowestFree AllocOrder = iota
	// Rotate hands out the first free address after the last one handed
	// out in the range, wrapping around: a just-released address (still in
	// clients' ARP caches and conntrack) is reused only once every other
	// free one has been handed out. It is the order edgelb used before
	// issue 37; choose it where addresses churn and stale client state
	// matters more than a predictable order.
	Rotate
)

// String is the option's value in configuration and flags.
func (o AllocOrder) String() string {
	if o == Rotate {
		return "rotate"
	}
	return "lowest-free"
}

// ParseAllocOrder reads "lowest-free" (or "") and "rotate".
func ParseAllocOrder(s string) (AllocOrder, error) {
	switch s {
	case "", "lowest-free":
		return LowestFree, nil
	case "rotate":
		return Rotate, nil
	}
	return LowestFree, &FieldError{Field: "allocationOrder", Value: s, Err: errors.New(`want "lowest-free" or "rotate"`)}
}

// SetOrder chooses how Allocate picks inside a range (LowestFree unless set).
func (a *Allocator) SetOrder(o AllocOrder) { a.seq = o }

// ipUse is one assigned address and who holds it.
type ipUse struct {
	pool   string // pool it was assigned from; "" once orphaned by ReplacePools
	key    string // sharing key every owner carries ("" = one exclusive owner)
	owners []owner
}

type owner struct {
	svc   string
	ports []PortProto
}

// Orphan is an assignment left outside every pool by ReplacePools.
type Orphan struct {
	Service string
	IP      netip.Addr
	// Pool is the pool the address had been assigned from.
	Pool string
}

// NewAllocator returns an allocator with no pools.
func NewAllocator() *Allocator {
	return &Allocator{
		pools:  map[string]*poolState{},
		ips:    map[netip.Addr]*ipUse{},
		held:   map[string][]netip.Addr{},
		shared: map[string]map[netip.Addr]struct{}{},
	}
}

// FamilyOf returns the family of an address.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// SetPools replaces the pool set atomically. It refuses (nothing changes)
// invalid pools, duplicate names, overlapping pools (*ConflictError quoting
// both ranges) and any change that would take an assigned address out of
// the pool it was assigned from (*ConflictError naming address and service).
func (a *Allocator) SetPools(pools []Pool) error {
	_, err := a.setPools(pools, true)
	return err
}

// ReplacePools is SetPools for callers that cannot refuse a pool change
// (the Kubernetes controller: the IPPool object has already changed). It
// still refuses invalid or overlapping pools, but keeps assignments that
// leave their pool and reports them; the caller moves those services.
// Orphaned addresses stay held until released, and are adopted again if a
// later pool set brings them back.
func (a *Allocator) ReplacePools(pools []Pool) ([]Orphan, error) {
	return a.setPools(pools, false)
}

func (a *Allocator) setPools(pools []Pool, strict bool) ([]Orphan, error) {
	byName := make(map[string]*poolState, len(pools))
	var names []string
	var ranges []*rangeState
	for i := range pools {
		p := &pools[i]
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("pool %q: %w", p.Name, err)
		}
		if _, dup := byName[p.Name]; dup {
			return nil, &FieldError{Field: "name", Value: p.Name, Err: errors.New("duplicate pool name")}
		}
		if err := CheckOverlap(p, pools[:i]); err != nil {
			return nil, err
		}
		ps := newPoolState(*p)
		byName[p.Name] = ps
		names = append(names, p.Name)
		ranges = append(ranges, ps.ranges...)
	}
	sort.Strings(names)
	ordered := make([]*poolState, 0, len(names))
	for _, n := range names {
		ordered = append(ordered, byName[n])
	}
	autoOrder(ordered)
	order := make([]string, len(ordered))
	for i, p := range ordered {
		order[i] = p.Name
	}
	sort.Slice(ranges, func(i, j int) bool { return rangeLess(ranges[i].Range, ranges[j].Range) })

	next := &Allocator{pools: byName, names: names, order: order, ranges: ranges}
	// Check every assignment against the new pools before touching anything.
	// An address stays taken in whatever new range covers it — also when it
	// left the pool it was assigned from (an overlapping pool replacing a
	// deleted one): it is held until its service releases it, and a range
	// that did not count it would hand it to a second service (issue 13:
	// one IP written to four Services, pool usage 0).
	var lost []Orphan
	home := make(map[netip.Addr]*rangeState, len(a.ips))
	for ip, u := range a.ips {
		rs := next.rangeOf(ip)
		if rs != nil && !rs.usableAddr(ip) {
			rs = nil
		}
		if u.pool != "" && (rs == nil || rs.pool.Name != u.pool) {
			lost = append(lost, Orphan{Service: u.owners[0].svc, IP: ip, Pool: u.pool})
		}
		if rs != nil {
			home[ip] = rs
		}
	}
	slices.SortFunc(lost, func(x, y Orphan) int { return x.IP.Compare(y.IP) })
	if strict && len(lost) > 0 {
		o := lost[0]
		return nil, &ConflictError{Field: "addresses", Value: o.IP.String(),
			Reason: fmt.Sprintf("address %s of pool %q is assigned to service %q (%d assigned address(es) would leave their pool)",
				o.IP, o.Pool, o.Service, len(lost))}
	}
	// Commit: rebuild the used sets of the new ranges. An orphan inside a
	// new range now counts in that range's pool (PoolOf finds it there);
	// one outside every range keeps pool "" and stays held, reserved, until
	// released.
	for _, o := range lost {
		a.ips[o.IP].pool = ""
	}
	for ip, rs := range home {
		rs.used.add(ip)
		rs.taken++
		rs.pool.used++
		a.ips[ip].pool = rs.pool.Name
	}
	a.pools, a.names, a.order, a.ranges = next.pools, next.names, next.order, next.ranges
	// Report every owner of each orphaned address.
	var out []Orphan
	for _, o := range lost {
		for _, w := range a.ips[o.IP].owners {
			out = append(out, Orphan{Service: w.svc, IP: o.IP, Pool: o.Pool})
		}
	}
	return out, nil
}

func rangeLess(x, y Range) bool {
	if x.Is4() != y.Is4() {
		return x.Is4()
	}
	return x.First.Less(y.First)
}

// rangeOf returns the range holding ip (binary search: ranges never overlap).
func (a *Allocator) rangeOf(ip netip.Addr) *rangeState {
	ip = ip.Unmap()
	i := sort.Search(len(a.ranges), func(i int) bool {
		r := a.ranges[i].Range
		if r.Is4() != ip.Is4() {
			return !r.Is4() // IPv4 ranges sort first
		}
		return ip.Compare(r.Last) <= 0
	})
	if i < len(a.ranges) && a.ranges[i].Contains(ip) {
		return a.ranges[i]
	}
	return nil
}

// conflict explains why svc may not hold ip next to its current owners.
func conflict(svc string, ip netip.Addr, u *ipUse, req Request) error {
	for _, o := range u.owners {
		if o.svc == svc {
			continue
		}
		if req.SharingKey == "" || u.key != req.SharingKey {
			why := "which does not share it"
			if u.key != "" {
				why = fmt.Sprintf("under sharing key %q", u.key)
			}
			if req.SharingKey != "" && u.key != "" {
				why += fmt.Sprintf(", not %q", req.SharingKey)
			}
			return &ConflictError{Field: "ip", Value: ip.String(),
				Reason: fmt.Sprintf("address %s is in use by service %q %s", ip, o.svc, why)}
		}
		for _, p := range req.Ports {
			if slices.Contains(o.ports, p) {
				return &ConflictError{Field: "ip", Value: ip.String(),
					Reason: fmt.Sprintf("address %s is shared with service %q, which also uses port %d/%s", ip, o.svc, p.Port, p.Protocol)}
			}
		}
	}
	return nil
}

// Assign gives svc exactly ip (a requested address). It returns a
// *FieldError when ip is outside every pool (or outside req.Pool, or a
// .0/.255 of a pool avoiding those), a *NotAdmittedError when ip's pool's
// serviceAllocation excludes the service (unless svc already holds ip: a
// held address is re-checked with Admitted and moved make before break, not
// dropped here) and a *ConflictError when another service holds ip and
// they may not share. Assigning an address svc already holds re-checks it
// against req and records req's ports and key. On success svc drops any
// other address of the same family.
func (a *Allocator) Assign(svc string, ip netip.Addr, req Request) error {
	return a.assign(svc, ip, req, true)
}

// Adopt is Assign for an address a service already held before this
// allocator existed (restored after a restart or a leader change): pool
// selectors are not checked here, so a new leader never drops an address
// break-before-make; the caller re-checks it with Admitted and moves it.
func (a *Allocator) Adopt(svc string, ip netip.Addr, req Request) error {
	return a.assign(svc, ip, req, false)
}

func (a *Allocator) assign(svc string, ip netip.Addr, req Request, admit bool) error {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return &FieldError{Field: "ip", Err: errors.New("no address given")}
	}
	if req.Pool != "" {
		if _, ok := a.pools[req.Pool]; !ok {
			return &FieldError{Field: "pool", Value: req.Pool, Err: errors.New("no such pool")}
		}
	}
	rs := a.rangeOf(ip)
	switch {
	case rs == nil && req.Pool != "":
		return &FieldError{Field: "ip", Value: ip.String(), Err: fmt.Errorf("not in pool %q", req.Pool)}
	case rs == nil:
		return &FieldError{Field: "ip", Value: ip.String(), Err: errors.New("not in any pool")}
	case req.Pool != "" && rs.pool.Name != req.Pool:
		return &FieldError{Field: "ip", Value: ip.String(), Err: fmt.Errorf("in pool %q, not in pool %q", rs.pool.Name, req.Pool)}
	case !rs.usableAddr(ip):
		return &FieldError{Field: "ip", Value: ip.String(), Err: fmt.Errorf("pool %q avoids addresses ending in .0 and .255", rs.pool.Name)}
	}
	if admit && !slices.Contains(a.held[svc], ip) {
		if err := rs.pool.admits(svc, req); err != nil {
			return err
		}
	}
	if u := a.ips[ip]; u != nil {
		if err := conflict(svc, ip, u, req); err != nil {
			return err
		}
	}
	a.commit(svc, ip, rs, req)
	return nil
}

// commit records svc on ip (checks done). rs is ip's range.
func (a *Allocator) commit(svc string, ip netip.Addr, rs *rangeState, req Request) {
	u := a.ips[ip]
	if u == nil {
		u = &ipUse{pool: rs.pool.Name}
		a.ips[ip] = u
		rs.take(ip)
		rs.pool.used++
	}
	// The sole owner may change the key in place; with others it already matches.
	if u.key != req.SharingKey {
		a.unshare(u.key, ip)
		u.key = req.SharingKey
	}
	if u.key != "" {
		m := a.shared[u.key]
		if m == nil {
			m = map[netip.Addr]struct{}{}
			a.shared[u.key] = m
		}
		m[ip] = struct{}{}
	}
	ports := slices.Clone(req.Ports)
	found := false
	for i := range u.owners {
		if u.owners[i].svc == svc {
			u.owners[i].ports, found = ports, true
		}
	}
	if !found {
		u.owners = append(u.owners, owner{svc: svc, ports: ports})
	}
	var drop []netip.Addr
	held := a.held[svc]
	for _, h := range held {
		if h != ip && h.Is4() == ip.Is4() {
			drop = append(drop, h)
		}
	}
	if !slices.Contains(held, ip) {
		a.held[svc] = append(held, ip)
	}
	for _, h := range drop {
		a.Release(svc, h)
	}
}

func (a *Allocator) unshare(key string, ip netip.Addr) {
	if key == "" {
		return
	}
	if m := a.shared[key]; m != nil {
		delete(m, ip)
		if len(m) == 0 {
			delete(a.shared, key)
		}
	}
}

// Allocate picks an address of family fam for svc: from req.Pool when set
// (a *NotAdmittedError when that pool's serviceAllocation excludes the
// service), else from the auto-assign pools admitting it in MetalLB's
// order: pools with a serviceAllocation first, by priority (lower first,
// unset last), then pools without one; name breaks ties. With a sharing key it
// first joins an address already shared under that key (ports disjoint).
// It is idempotent: when svc already holds an address of fam that
// satisfies req (in one of those pools, sharing allowed), that address is
// returned with req recorded; otherwise svc moves to a new address (the old
// one is released only once the new one is found). When none is
// free the error wraps ErrExhausted and names the pool(s).
func (a *Allocator) Allocate(svc string, fam Family, req Request) (netip.Addr, error) {
	var cands []*poolState
	if req.Pool != "" {
		p, ok := a.pools[req.Pool]
		if !ok {
			return netip.Addr{}, &FieldError{Field: "pool", Value: req.Pool, Err: errors.New("no such pool")}
		}
		if err := p.admits(svc, req); err != nil {
			return netip.Addr{}, err
		}
		cands = []*poolState{p}
	} else {
		for _, n := range a.order {
			if p := a.pools[n]; p.AutoAssign && p.admits(svc, req) == nil {
				cands = append(cands, p)
			}
		}
	}
	inCands := func(pool string) bool {
		for _, p := range cands {
			if p.Name == pool {
				return true
			}
		}
		return false
	}
	// Keep what svc holds when it still fits (in a candidate pool: without
	// req.Pool, an auto-assign one).
	for _, h := range a.held[svc] {
		if FamilyOf(h) != fam {
			continue
		}
		if u := a.ips[h]; u.pool != "" && inCands(u.pool) && conflict(svc, h, u, req) == nil {
			a.commit(svc, h, a.rangeOf(h), req)
			return h, nil
		}
	}
	// Join an address already shared under the key: lowest one, so the
	// choice does not depend on map order.
	if req.SharingKey != "" {
		var best netip.Addr
		for ip := range a.shared[req.SharingKey] {
			u := a.ips[ip]
			if FamilyOf(ip) != fam || !inCands(u.pool) || (best.IsValid() && best.Less(ip)) {
				continue
			}
			if conflict(svc, ip, u, req) == nil {
				best = ip
			}
		}
		if best.IsValid() {
			a.commit(svc, best, a.rangeOf(best), req)
			return best, nil
		}
	}
	for _, p := range cands {
		for _, rs := range p.ranges {
			if FamilyOf(rs.First) != fam {
				continue
			}
			if ip, ok := rs.pick(a.seq); ok {
				if u := a.ips[ip]; u != nil {
					// setPools keeps every held address taken, so this cannot
					// be; were it ever, handing it out would give one address
					// to two services: refuse instead.
					return netip.Addr{}, &ConflictError{Field: "ip", Value: ip.String(),
						Reason: fmt.Sprintf("allocator: pool %q offered %s, which service %q holds (an internal inconsistency; nothing assigned)", p.Name, ip, u.owners[0].svc)}
				}
				a.commit(svc, ip, rs, req)
				return ip, nil
			}
		}
	}
	switch {
	case req.Pool != "":
		return netip.Addr{}, fmt.Errorf("allocate an %s address for service %q from pool %q: %w", fam, svc, req.Pool, ErrExhausted)
	case len(cands) == 0:
		return netip.Addr{}, fmt.Errorf("allocate an %s address for service %q: no auto-assign pool admits it: %w", fam, svc, ErrExhausted)
	}
	names := make([]string, len(cands))
	for i, p := range cands {
		names[i] = fmt.Sprintf("%q", p.Name)
	}
	return netip.Addr{}, fmt.Errorf("allocate an %s address for service %q from auto-assign pool(s) %s: %w",
		fam, svc, strings.Join(names, ", "), ErrExhausted)
}

// Release drops svc's hold on ip; the address is free once nobody holds it.
func (a *Allocator) Release(svc string, ip netip.Addr) {
	ip = ip.Unmap()
	held := a.held[svc]
	i := slices.Index(held, ip)
	if i < 0 {
		return
	}
	held = slices.Delete(held, i, i+1)
	if len(held) == 0 {
		delete(a.held, svc)
	} else {
		a.held[svc] = held
	}
	u := a.ips[ip]
	if u == nil {
		return
	}
	u.owners = slices.DeleteFunc(u.owners, func(o owner) bool { return o.svc == svc })
	if len(u.owners) > 0 {
		return
	}
	delete(a.ips, ip)
	a.unshare(u.key, ip)
	if u.pool == "" {
		return
	}
	if rs := a.rangeOf(ip); rs != nil {
		rs.free(ip)
		rs.pool.used--
	}
}

// ReleaseAll drops every address svc holds.
func (a *Allocator) ReleaseAll(svc string) {
	for _, ip := range slices.Clone(a.held[svc]) {
		a.Release(svc, ip)
	}
}

// IPs returns the addresses svc holds, IPv4 first.
func (a *Allocator) IPs(svc string) []netip.Addr {
	out := slices.Clone(a.held[svc])
	sortAddrs(out)
	return out
}

// sortAddrs orders IPv4 before IPv6, then by address.
func sortAddrs(s []netip.Addr) {
	slices.SortFunc(s, func(x, y netip.Addr) int {
		if x.Is4() != y.Is4() {
			if x.Is4() {
				return -1
			}
			return 1
		}
		return x.Compare(y)
	})
}

// Owners returns the services holding ip, sorted.
func (a *Allocator) Owners(ip netip.Addr) []string {
	u := a.ips[ip.Unmap()]
	if u == nil {
		return nil
	}
	out := make([]string, len(u.owners))
	for i, o := range u.owners {
		out[i] = o.svc
	}
	sort.Strings(out)
	return out
}

// PoolOf returns the pool whose ranges contain ip.
func (a *Allocator) PoolOf(ip netip.Addr) (string, bool) {
	if rs := a.rangeOf(ip); rs != nil {
		return rs.pool.Name, true
	}
	return "", false
}

// Usage returns the number of addresses the pool may hand out (capped at
// MaxUint64 for huge IPv6 pools) and how many distinct ones are held.
func (a *Allocator) Usage(pool string) (size uint64, used int) {
	p, ok := a.pools[pool]
	if !ok {
		return 0, 0
	}
	return p.size, p.used
}

// Used returns how many distinct addresses of the pool are held.
func (a *Allocator) Used(pool string) int {
	_, u := a.Usage(pool)
	return u
}

// Pools returns copies of the pools, sorted by name.
func (a *Allocator) Pools() []Pool {
	out := make([]Pool, 0, len(a.names))
	for _, n := range a.names {
		out = append(out, clonePool(a.pools[n].Pool))
	}
	return out
}

// Assigned returns every service holding an address, sorted (for
// consistency checks and metrics).
func (a *Allocator) Assigned() []string {
	out := make([]string, 0, len(a.held))
	for s := range a.held {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Clone returns an independent copy (the engine works on a copy and swaps
// it in only once the store has the change, so a failed write leaves the
// allocator as it was). The used sets are copied lazily (copy-on-write).
func (a *Allocator) Clone() *Allocator { return a.CloneFor(0) }

// CloneFor is Clone with room for the given number of services and one
// address each (dual-stack ones need two: that map then grows once). A
// start-up assigns 10,000 of them in one transaction, and maps grown one
// doubling at a time rehashed every entry again and again.
func (a *Allocator) CloneFor(services int) *Allocator {
	c := &Allocator{
		pools:  make(map[string]*poolState, len(a.pools)),
		names:  slices.Clone(a.names),
		order:  slices.Clone(a.order),
		ips:    make(map[netip.Addr]*ipUse, max(len(a.ips), services)),
		held:   make(map[string][]netip.Addr, max(len(a.held), services)),
		shared: make(map[string]map[netip.Addr]struct{}, len(a.shared)),
		seq:    a.seq,
	}
	moved := make(map[*rangeState]*rangeState, len(a.ranges))
	for n, p := range a.pools {
		np := *p
		np.ranges = make([]*rangeState, len(p.ranges))
		for i, rs := range p.ranges {
			nr := *rs
			nr.pool = &np
			nr.used = usedSet{t: rs.used.t.Clone()}
			np.ranges[i] = &nr
			moved[rs] = &nr
		}
		c.pools[n] = &np
	}
	c.ranges = make([]*rangeState, len(a.ranges))
	for i, rs := range a.ranges {
		c.ranges[i] = moved[rs]
	}
	for ip, u := range a.ips {
		// ports slices are replaced, never written in place: sharing them is safe.
		c.ips[ip] = &ipUse{pool: u.pool, key: u.key, owners: slices.Clone(u.owners)}
	}
	for s, h := range a.held {
		c.held[s] = slices.Clone(h)
	}
	for k, m := range a.shared {
		c.shared[k] = maps.Clone(m)
	}
	return c
}
