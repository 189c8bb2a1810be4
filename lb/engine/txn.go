package engine

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// txn is one logical change prepared on copies: a cloned allocator and
// copied maps. commit writes the store once and only then swaps the copies
// in; any error before that leaves the engine exactly as it was.
type txn struct {
	e     *Engine
	alloc *lb.Allocator
	pools map[string]store.Pool
	svcs  map[string]*service
	// origSvcs is the engine's service map the txn started from (unchanged).
	origSvcs map[string]*service

	poolsChanged map[string]bool // put or deleted
	svcsChanged  map[string]bool // put or deleted (store records)
	touched      map[string]bool // services to reconcile (IPs may change)
	// strict names the service whose requested VIPs must be granted: the
	// caller gets the Field/ConflictError instead of a pending service.
	strict string
	// reconcileAll reconciles every service (start-up).
	reconcileAll bool
	// before returns a service's addresses as stored (default: the
	// engine's current allocator).
	before func(name string) []netip.Addr
}

func (e *Engine) begin() *txn { return e.beginFor(0) }

// beginFor is begin for a transaction that may put up to n services (a
// config sync): its maps are sized once instead of growing by doubling,
// which at 10,000 services was about a tenth of the start-up writer's CPU.
func (e *Engine) beginFor(n int) *txn {
	svcs := make(map[string]*service, max(len(e.svcs), n))
	maps.Copy(svcs, e.svcs)
	return &txn{
		e:            e,
		alloc:        e.alloc.CloneFor(n),
		pools:        maps.Clone(e.pools),
		svcs:         svcs,
		origSvcs:     e.svcs,
		poolsChanged: map[string]bool{},
		svcsChanged:  make(map[string]bool, n),
		touched:      make(map[string]bool, n),
		before:       e.alloc.IPs,
	}
}

func (t *txn) putPool(p store.Pool) {
	t.pools[p.Name] = p
	t.poolsChanged[p.Name] = true
}

func (t *txn) deletePool(name string) {
	delete(t.pools, name)
	t.poolsChanged[name] = true
}

func (t *txn) putService(s store.Service) { t.putServiceRef(&service{Service: s}) }

// putServiceRef puts s itself (a config sync puts the very records it
// validated instead of a second copy of each).
func (t *txn) putServiceRef(s *service) {
	t.svcs[s.Spec.Name] = s
	t.svcsChanged[s.Spec.Name] = true
	t.touched[s.Spec.Name] = true
}

func (t *txn) deleteService(name string) {
	delete(t.svcs, name)
	t.svcsChanged[name] = true
	t.touched[name] = true
}

func (t *txn) poolList() []lb.Pool {
	out := make([]lb.Pool, 0, len(t.pools))
	for _, n := range store.Names(t.pools) {
		out = append(out, t.pools[n].Pool)
	}
	return out
}

// commit reconciles, writes the store, swaps, publishes.
func (t *txn) commit() error {
	// Which services to (re)consider: changed ones, pending ones (an
	// address may have freed up or a pool appeared), or all at start-up.
	var names []string
	if t.reconcileAll {
		names = make([]string, 0, len(t.svcs))
	}
	for n := range t.svcs {
		if t.reconcileAll || t.touched[n] || t.svcs[n].pending != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)

	// 1. Release first: deleted services, and addresses a changed service
	// no longer wants. Done before the pool change (a pool may shrink
	// over an address being released) and before any assignment (two
	// services may swap requested VIPs).
	for n := range t.touched {
		if _, ok := t.svcs[n]; !ok {
			t.alloc.ReleaseAll(n)
		}
	}
	for _, n := range names {
		spec := &t.svcs[n].Spec
		for _, ip := range t.alloc.IPs(n) {
			if !t.wants(spec, ip) {
				t.alloc.Release(n, ip)
			}
		}
	}
	// 2. The pool set: refuses (nothing changes) when an address in use
	// would leave its pool.
	if len(t.poolsChanged) > 0 {
		if err := t.alloc.SetPools(t.poolList()); err != nil {
			return err
		}
	}
	// 3. Assign in three tiers, each in name order: services that keep
	// their addresses (nothing allocated for a newcomer can take them),
	// then services that request specific VIPs, then automatic ones. So an
	// automatic service never takes an address somebody asked for, and the
	// result does not depend on names or on the order of the input (issue
	// 13: 90 of 150 requesters were left pending by automatic services
	// whose names sorted first).
	tiers := make(map[string]int, len(names))
	for _, n := range names {
		tiers[n] = t.tier(n)
	}
	slices.SortStableFunc(names, func(a, b string) int { return tiers[a] - tiers[b] })
	for _, n := range names {
		if err := t.reconcile(n); err != nil {
			return err
		}
	}

	// 4. One store write with everything that changed.
	// Sized once: at start-up every service is a put, and growing the
	// slice by doubling copied 10,000 specs again and again (~40 ms).
	ch := store.Change{PutAssignments: make(map[string][]netip.Addr, len(names)), PutServices: make([]store.Service, 0, len(t.svcsChanged))}
	for _, n := range store.Names(t.poolsChanged) {
		if p, ok := t.pools[n]; ok {
			ch.PutPools = append(ch.PutPools, p)
		} else {
			ch.DeletePools = append(ch.DeletePools, n)
		}
	}
	for _, n := range store.Names(t.svcsChanged) {
		if s, ok := t.svcs[n]; ok {
			ch.PutServices = append(ch.PutServices, s.Service)
		} else {
			ch.DeleteServices = append(ch.DeleteServices, n)
		}
	}
	check := maps.Clone(t.touched)
	for _, n := range names {
		check[n] = true
	}
	allocations := 0
	for n := range check {
		old, now := t.before(n), t.alloc.IPs(n)
		if !slices.Equal(old, now) {
			ch.PutAssignments[n] = now // empty deletes
			for _, ip := range now {
				if !slices.Contains(old, ip) {
					allocations++
				}
			}
		}
	}
	if !ch.Empty() {
		if err := t.e.st.Commit(ch); err != nil {
			t.e.met.commits.WithLabelValues("error").Inc()
			if r := store.FailureReason(err); r != "" {
				t.e.met.commitFailures.WithLabelValues(string(r)).Inc()
				t.e.trouble.Store(&storeTrouble{at: time.Now(), err: err})
			}
			return fmt.Errorf("save the change: %w", err)
		}
		t.e.met.commits.WithLabelValues("ok").Inc()
		t.e.trouble.Store(nil)
		if a := t.e.actor; a != nil && t.e.opts.Audit != nil {
			t.e.opts.Audit.Record(*a, t.auditChanges())
		}
	}

	// 5. Swap in and publish.
	e := t.e
	e.alloc, e.pools, e.svcs = t.alloc, t.pools, t.svcs
	for n := range check {
		_, had := t.origSvcs[n]
		_, has := e.svcs[n]
		e.invalidate(n, had != has)
	}
	for n := range t.touched {
		if _, ok := e.svcs[n]; !ok {
			delete(e.unhealthy, n)
		}
	}
	e.met.allocations.Add(float64(allocations))
	e.refresh()
	return nil
}

// tier orders assignment: 0 holds addresses already, 1 requests VIPs,
// 2 is allocated automatically.
func (t *txn) tier(n string) int {
	switch {
	case len(t.alloc.IPs(n)) > 0:
		return 0
	case len(t.svcs[n].Spec.VIPs) > 0:
		return 1
	}
	return 2
}

// wants reports whether spec still wants ip (else it is released before
// anything is assigned).
func (t *txn) wants(spec *lb.ServiceSpec, ip netip.Addr) bool {
	fam := lb.FamilyOf(ip)
	if len(spec.VIPs) > 0 {
		return slices.Contains(spec.VIPs, ip)
	}
	if !slices.Contains(spec.Families, fam) {
		return false
	}
	pool, ok := t.alloc.PoolOf(ip)
	if !ok {
		return false
	}
	if spec.Pool != "" {
		return pool == spec.Pool
	}
	return t.pools[pool].AutoAssign
}

// reconcile gives service n what its spec asks for, or records why not.
func (t *txn) reconcile(n string) error {
	s := t.svcs[n]
	spec := &s.Spec
	req := spec.Request()
	var why []string
	if len(spec.VIPs) > 0 {
		for _, ip := range spec.VIPs {
			err := t.alloc.Assign(n, ip, req)
			if err == nil {
				continue
			}
			if n == t.strict {
				return vipError(spec, ip, err)
			}
			why = append(why, fmt.Sprintf("VIP %s: %v", ip, err))
		}
	} else {
		for _, fam := range spec.Families {
			if _, err := t.alloc.Allocate(n, fam, req); err != nil {
				var fe *lb.FieldError
				if n == t.strict && errors.As(err, &fe) {
					return err
				}
				why = append(why, err.Error())
			}
		}
	}
	pending := ""
	if len(why) > 0 {
		pending = why[0]
		for _, w := range why[1:] {
			pending += "; " + w
		}
	}
	if pending != s.pending {
		t.svcs[n] = &service{Service: s.Service, pending: pending}
	}
	return nil
}

// vipError re-fields an allocator error on a requested VIP with the
// spec's JSON path ("vips[0]").
func vipError(spec *lb.ServiceSpec, ip netip.Addr, err error) error {
	field := "vips"
	if i := slices.Index(spec.VIPs, ip); i >= 0 {
		field = fmt.Sprintf("vips[%d]", i)
	}
	var fe *lb.FieldError
	if errors.As(err, &fe) && fe.Field == "ip" {
		return &lb.FieldError{Field: field, Value: fe.Value, Err: fe.Err}
	}
	var ce *lb.ConflictError
	if errors.As(err, &ce) {
		return &lb.ConflictError{Field: field, Value: ce.Value, Reason: ce.Reason}
	}
	return err
}
