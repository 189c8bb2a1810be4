package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/edgelb/edgelb/proxy"
)

// plan and commit: a proxy.Config checked and turned into changes to the
// model (ids, chains, elements), and the model updated once they are in the
// kernel.

// changes is a validated Config relative to the model.
type changes struct {
	upserts []*svcState // new or changed services (ids assigned)
	olds    []*svcState // what each upsert replaces (nil: new)
	removes []*svcState
	nodes   map[netip.Addr]bool // nil: unchanged
	order   []*svcState         // the Config's services in its order
	failed  map[proxy.Key]error // services refused one by one (nil: none)
}

// refuse records a per-service refusal; the first reason for a key wins.
func (ch *changes) refuse(k proxy.Key, err error) {
	if ch.failed == nil {
		ch.failed = map[proxy.Key]error{}
	}
	if _, ok := ch.failed[k]; !ok {
		ch.failed[k] = err
	}
}

// plan validates cfg and computes what changes. It does not touch the model.
func (d *Dataplane) plan(cfg proxy.Config) (*changes, error) {
	ch := &changes{}
	var errs []error
	// Mark the model's services this Config names (no per-Apply map of all
	// keys: a one-service change among 10,000 should cost little more than
	// reading the Config).
	d.gen++
	gen, visited := d.gen, 0
	var fresh map[proxy.Key]int // keys new to the model, for duplicates
	usedHints := map[uint32]bool{}
	order := make([]*svcState, len(cfg.Services))
	for i := range cfg.Services {
		s := &cfg.Services[i]
		var old *svcState
		key := s.Key()
		// The engine hands services over in a stable order: try the one at
		// the same position last time before hashing the key.
		if i < len(d.order) && d.order[i] != nil && d.order[i].key == key {
			old = d.order[i]
		} else {
			old = d.svcs[key]
		}
		if old != nil {
			if old.gen == gen {
				ch.refuse(key, svcError(s, fmt.Errorf("listed twice (service %d)", i)))
				continue
			}
			old.gen = gen
			visited++
			if sameInput(&old.in, s) {
				order[i] = old
				continue
			}
		} else {
			if fresh == nil {
				fresh = map[proxy.Key]int{}
			}
			if j, dup := fresh[key]; dup {
				ch.refuse(key, svcError(s, fmt.Errorf("listed twice (services %d and %d)", j, i)))
				continue
			}
			fresh[key] = i
		}
		st, err := prepare(s)
		if err != nil {
			// Refused alone: a service programmed before keeps its last
			// good state (old stays marked, so it is not removed).
			ch.refuse(key, err)
			order[i] = old
			continue
		}
		st.gen = gen
		order[i] = st
		switch {
		case old != nil:
			if old.id&idClassMask == st.post.idClass() {
				st.id = old.id
			} // else a new id below: the class is in it
			st.keepPositions(old)
		default:
			if id, ok := d.hint(st); ok && !usedHints[id] && id&idClassMask == st.post.idClass() {
				st.id = id
				usedHints[id] = true
				// A restarted daemon keeps the buckets as they are.
				st.keepPositions(d.kernelLayout(id, st.v6))
			}
		}
		ch.upserts = append(ch.upserts, st)
		ch.olds = append(ch.olds, old)
	}
	if visited < len(d.svcs) {
		for _, st := range d.svcs {
			if st.gen != gen {
				ch.removes = append(ch.removes, st)
			}
		}
	}
	d.checkFrontends(ch)
	ch.dropRefused(order)

	nodes := make(map[netip.Addr]bool, len(cfg.NodeAddrs))
	for _, a := range cfg.NodeAddrs {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			errs = append(errs, fmt.Errorf("nft: node address %q: want a plain IPv4 or IPv6 address", a))
			continue
		}
		nodes[a] = true
	}
	if len(nodes) != len(d.nodes) || !mapsEqual(nodes, d.nodes) {
		ch.nodes = nodes
	}
	if len(errs) > 0 {
		// Config-wide: nothing is programmed, so name every refusal.
		if len(ch.failed) > 0 {
			errs = append(errs, &proxy.ServiceErrors{Failed: ch.failed})
		}
		return nil, errors.Join(errs...)
	}
	// Ids last, so a refused Config consumes none.
	for _, st := range ch.upserts {
		if st.id == 0 {
			id, err := d.allocID(ch, st.post.idClass())
			if err != nil {
				return nil, err
			}
			st.id = id
		}
	}
	ch.order = order
	return ch, nil
}

// allocID hands out ids of a class in increasing order of their number
// (one counter for all classes), so a deleted service's id (and any
// affinity entry still carrying it) is not reused soon; after the 2^22nd
// it wraps and takes the next id nobody holds.
func (d *Dataplane) allocID(ch *changes, class uint32) (uint32, error) {
	if d.nextID <= idNumMax {
		id := idTag | class | d.nextID
		d.nextID++
		return id, nil
	}
	used := make(map[uint32]bool, len(d.svcs)+len(ch.upserts))
	for _, st := range d.svcs {
		used[st.id] = true
	}
	for _, st := range ch.upserts {
		used[st.id] = true
	}
	for n := uint32(1); n <= idNumMax; n++ {
		if id := idTag | class | n; !used[id] {
			return id, nil
		}
	}
	return 0, errors.New("nft: no free service id (4M services?)")
}

func mapsEqual(a, b map[netip.Addr]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// checkFrontends refuses two services answering on the same frontend (the
// same VIP:port/proto under keys that differ by node port, or one node port
// twice).
func (d *Dataplane) checkFrontends(ch *changes) {
	if len(ch.upserts) == 0 {
		return
	}
	moving := make(map[proxy.Key]bool, len(ch.upserts)+len(ch.removes))
	for _, st := range ch.upserts {
		moving[st.key] = true
	}
	for _, st := range ch.removes {
		moving[st.key] = true
	}
	claimed := map[frontend]proxy.Key{}
	for _, st := range ch.upserts {
		// A refused service claims none of its frontends, so it cannot
		// take a later, valid one down with it.
		bad := false
		for _, f := range st.frontends() {
			other, ok := claimed[f]
			if !ok {
				other, ok = d.fronts[f]
				ok = ok && other != st.key && !moving[other]
			}
			if ok {
				ch.refuse(st.key, svcError(&st.in, fmt.Errorf("frontend %s is also service %s's", f, other)))
				bad = true
			}
		}
		if bad {
			continue
		}
		for _, f := range st.frontends() {
			claimed[f] = st.key
		}
	}
}

// dropRefused takes the upserts refused after prepare (a frontend conflict)
// out of the plan: the one it would replace stays as it is.
func (ch *changes) dropRefused(order []*svcState) {
	if len(ch.failed) == 0 {
		return
	}
	back := map[*svcState]*svcState{}
	ups, olds := ch.upserts[:0], ch.olds[:0]
	for i, st := range ch.upserts {
		if _, bad := ch.failed[st.key]; bad {
			back[st] = ch.olds[i]
			continue
		}
		ups, olds = append(ups, st), append(olds, ch.olds[i])
	}
	ch.upserts, ch.olds = ups, olds
	if len(back) == 0 {
		return
	}
	for i, st := range order {
		if old, ok := back[st]; ok {
			order[i] = old
		}
	}
}

// commit makes the planned state the model. It returns the pick-* and
// post-* chains that came into use and those no longer used.
func (d *Dataplane) commit(ch *changes) (created, deleted []famChain) {
	before := make(map[famChain]bool, len(d.chains))
	for c := range d.chains {
		before[c] = true
	}
	drop := func(st *svcState) {
		delete(d.svcs, st.key)
		for _, f := range st.frontends() {
			if d.fronts[f] == st.key {
				delete(d.fronts, f)
			}
		}
		for _, c := range st.chains() {
			if d.chains[c]--; d.chains[c] <= 0 {
				delete(d.chains, c)
			}
		}
	}
	for _, st := range ch.removes {
		drop(st)
	}
	for _, old := range ch.olds {
		if old != nil {
			drop(old)
		}
	}
	for _, st := range ch.upserts {
		d.svcs[st.key] = st
		for _, f := range st.frontends() {
			d.fronts[f] = st.key
		}
		for _, c := range st.chains() {
			d.chains[c]++
		}
	}
	if ch.nodes != nil {
		d.nodes = ch.nodes
	}
	d.order = ch.order
	for c := range d.chains {
		if !before[c] {
			created = append(created, c)
		}
	}
	for c := range before {
		if d.chains[c] == 0 {
			deleted = append(deleted, c)
		}
	}
	sortChains(created)
	sortChains(deleted)
	return created, deleted
}

// famChain is a pick-* or post-* chain in one of the two tables.
type famChain struct {
	v6   bool
	name string
}

// chains are the shared chains a service's elements point to.
func (st *svcState) chains() []famChain {
	var cs []famChain
	if st.post.viaMap() {
		cs = append(cs, famChain{st.v6, st.post.chain()})
	}
	if st.pick.n > 0 {
		cs = append(cs, famChain{st.v6, st.pick.chain()})
	}
	return cs
}

func sortChains(cs []famChain) {
	slices.SortFunc(cs, func(a, b famChain) int {
		switch {
		case a.v6 != b.v6 && b.v6:
			return -1
		case a.v6 != b.v6:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
}
