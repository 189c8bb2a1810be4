package nft

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// elem is one set element as edgelb wants it.
type elem struct {
	v6    bool // which table (ip6 edgelb or ip edgelb)
	set   string
	key   []byte
	val   []byte // map data; nil for plain sets and the dispatch vmap
	chain string // dispatch, post: the goto target
}

// value is how an element's data compares with the kernel's.
func (e elem) value() string {
	if e.set == setDispatch || e.set == setPost {
		return "goto:" + e.chain
	}
	return string(e.val)
}

// id is where the element is found: table, set and key.
func (e elem) id() string {
	t := "4"
	if e.v6 {
		t = "6"
	}
	return t + e.set + "\x00" + string(e.key)
}

func (e elem) size() int { return len(e.key) + len(e.val) + len(e.chain) + 40 }

// rank orders writes so a packet never finds a frontend whose dispatch or
// backends are missing: deletes go frontends first, adds backends first.
func rank(set string) int {
	switch set {
	case setDispatch, setPost:
		return 1
	case setBE:
		return 2
	}
	return 0
}

// elems renders a service into its set elements.
func (st *svcState) elems() []elem { return st.appendElems(make([]elem, 0, st.buckets()+4)) }

// appendElems appends a service's set elements to out (elemDiff reuses one
// buffer for every service instead of a slice each).
func (st *svcState) appendElems(out []elem) []elem {
	val := encU32(st.id)
	n := st.buckets()
	if st.key.VIP.IsValid() {
		out = append(out, elem{v6: st.v6, set: setVIP, key: encVIPKey(st.key.VIP, st.key.Protocol, st.key.Port), val: val})
	}
	if st.key.NodePort != 0 {
		out = append(out, elem{v6: st.v6, set: setNP, key: encNodePortKey(st.key.Protocol, st.key.NodePort), val: val})
	}
	out = append(out, elem{v6: st.v6, set: setDispatch, key: encU32(st.id), chain: st.pick.chain()})
	if st.post.viaMap() {
		out = append(out, elem{v6: st.v6, set: setPost, key: encU32(st.id), chain: st.post.chain()})
	}
	for i := 0; i < n; i++ {
		out = append(out, elem{v6: st.v6, set: setBE, key: encBucketKey(st.id, i), val: st.bucket(i)})
	}
	return out
}

func nodeElem(a netip.Addr) elem { return elem{v6: a.Is6(), set: setNodes, key: a.AsSlice()} }

// diffElems returns what turns old into new: deletes (absent or changed)
// and adds (new or changed; a changed value is a delete plus an add).
func diffElems(old, new []elem) (del, add []elem) {
	if len(old) == 0 {
		return nil, new
	}
	have := make(map[string]elem, len(old))
	for _, e := range old {
		have[e.id()] = e
	}
	for _, e := range new {
		k := e.id()
		o, ok := have[k]
		delete(have, k)
		if ok && o.value() == e.value() {
			continue
		}
		if ok {
			del = append(del, o)
		}
		add = append(add, e)
	}
	for _, e := range old {
		if _, ok := have[e.id()]; ok {
			del = append(del, e)
		}
	}
	return del, add
}

// addChain creates a chain with edgelb's rules in it.
func (d *Dataplane) addChain(f fam, ch *nftables.Chain) op {
	rules := f.rulesOf(ch.Name)
	return op{1 + len(rules), func(c *nftables.Conn) error {
		c.AddChain(ch)
		for _, r := range rules {
			c.AddRule(r.build(ch.Table, ch.Name))
		}
		return nil
	}}
}

func (d *Dataplane) delChain(f fam, name string) op {
	return op{1, func(c *nftables.Conn) error {
		c.DelChain(&nftables.Chain{Table: d.tableOf(f.v6), Name: name})
		return nil
	}}
}

// incremental writes what changed since the last Apply: one unit per
// changed service, normally one batch.
func (d *Dataplane) incremental(ctx context.Context, ch *changes, created, deleted []famChain) error {
	var units []unit
	var purge []*svcState
	for i, st := range ch.upserts {
		var oldElems []elem
		if old := ch.olds[i]; old != nil {
			oldElems = old.elems()
			switch {
			case old.pick.sticky && old.id != st.id:
				// A new id (its class changed): the old id's clients go.
				purge = append(purge, &svcState{id: old.id})
			case old.pick.sticky && lostBackends(old, st):
				purge = append(purge, st)
			}
		}
		del, add := diffElems(oldElems, st.elems())
		units = append(units, unit{del, add})
	}
	for _, st := range ch.removes {
		units = append(units, unit{del: st.elems()})
		if st.pick.sticky {
			// Forget its clients: no later service may inherit them.
			purge = append(purge, &svcState{id: st.id})
		}
	}
	if ch.nodes != nil {
		// A node-address change replaces the small node sets: simpler than
		// tracking the previous ones, and rare.
		var u unit
		for a := range ch.nodes {
			u.add = append(u.add, nodeElem(a))
		}
		units = append(units, u)
	}
	bs := pack(units, d.budget, d.maxMsgs)
	if ch.nodes != nil {
		bs[0].pre = append(bs[0].pre, op{2, func(c *nftables.Conn) error {
			c.FlushSet(d.setRef(false, setNodes))
			c.FlushSet(d.setRef(true, setNodes))
			return nil
		}})
	}
	for _, fc := range created {
		bs[0].pre = append(bs[0].pre, d.addChain(d.famOf(fc.v6), &nftables.Chain{Table: d.tableOf(fc.v6), Name: fc.name}))
	}
	last := bs[len(bs)-1]
	for _, fc := range deleted {
		last.post = append(last.post, d.delChain(d.famOf(fc.v6), fc.name))
	}
	if err := d.recoverLostAcks(ctx, d.flush(ctx, bs)); err != nil {
		return err
	}
	if len(purge) > 0 {
		return d.purgeAffinity(ctx, purge)
	}
	return nil
}

// lostBackends reports whether new no longer uses a backend old did.
func lostBackends(old, new *svcState) bool {
	keep := make(map[string]bool, new.buckets())
	for i := 0; i < new.buckets(); i++ {
		keep[string(new.bucket(i))] = true
	}
	for i := 0; i < old.buckets(); i++ {
		if !keep[string(old.bucket(i))] {
			return true
		}
	}
	return false
}

// purgeAffinity deletes remembered client→backend entries of the given
// services that point to a backend they no longer use (removed, weight 0
// or draining), so such a backend takes no new connections even from
// sticky clients; a service without backends (a removed one) loses all. Entries can expire between the dump and the delete, so
// a batch failing with ENOENT is retried from a fresh dump.
func (d *Dataplane) purgeAffinity(ctx context.Context, svcs []*svcState) error {
	want := map[uint32]map[string]bool{}
	for _, st := range svcs {
		keep := map[string]bool{}
		for i := 0; i < st.buckets(); i++ {
			keep[string(st.bucket(i))] = true
		}
		want[st.id] = keep
	}
	var err error
	for try := 0; try < 3; try++ {
		var u unit
		for _, f := range d.fams {
			els, gerr := d.conn.GetSetElements(d.setRef(f.v6, setAff))
			if gerr != nil {
				return fmt.Errorf("nft: read %s affinity: %w", f, gerr)
			}
			for _, e := range els {
				if len(e.Key) < 4 {
					continue
				}
				if keep, ok := want[decU32(e.Key[:4])]; ok && !keep[string(e.Val)] {
					u.del = append(u.del, elem{v6: f.v6, set: setAff, key: e.Key})
				}
			}
		}
		if err = d.flush(ctx, pack([]unit{u}, d.budget, d.maxMsgs)); err == nil || !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return err
}

// adopt takes service ids from tables a previous run left, and makes sure
// new ids never collide with ids still in the kernel.
func (d *Dataplane) adopt(s *snapshot) {
	d.hints = map[string]uint32{}
	d.hintBE = map[uint32]map[uint32]string{}
	maxNum := uint32(0) // the highest id number in the kernel
	for _, f := range d.fams {
		ts := s.of(f.v6)
		for _, set := range []string{setVIP, setNP} {
			for k, v := range ts.elems[set] {
				if len(v) == 4 {
					id := decU32([]byte(v))
					d.hints[elem{v6: f.v6, set: set, key: []byte(k)}.id()] = id
					maxNum = max(maxNum, idNum(id))
				}
			}
		}
		for _, set := range []string{setDispatch, setPost, setBE} {
			for k, v := range ts.elems[set] {
				if len(k) < 4 {
					continue
				}
				id := decU32([]byte(k[:4]))
				maxNum = max(maxNum, idNum(id))
				if set == setBE && len(k) == 8 {
					m := d.hintBE[id]
					if m == nil {
						m = map[uint32]string{}
						d.hintBE[id] = m
					}
					m[decU32([]byte(k[4:]))] = v
				}
			}
		}
	}
	if maxNum >= d.nextID {
		d.nextID = maxNum + 1
	}
}

// idNum is the number of an id of ours (0 for a value someone else wrote).
func idNum(id uint32) uint32 {
	if id&idTagMask != idTag {
		return 0
	}
	return id & idNumMask
}

// kernelLayout is the bucket layout the kernel holds for id (as a service
// state keepPositions can compare with), or nil.
func (d *Dataplane) kernelLayout(id uint32, v6 bool) *svcState {
	m := d.hintBE[id]
	if len(m) == 0 {
		return nil
	}
	old := &svcState{v6: v6}
	for i := 0; i < len(m); i++ {
		v, ok := m[uint32(i)]
		if !ok || len(v) != old.stride() {
			return nil
		}
		old.be = append(old.be, v...)
	}
	return old
}

// hint returns the id the kernel already uses for a service's frontend.
func (d *Dataplane) hint(st *svcState) (uint32, bool) {
	if len(d.hints) == 0 {
		// A cold start reads an empty kernel: no need to render every
		// service's elements (150,000 at 10,000 × 10) to look for none.
		return 0, false
	}
	for _, e := range st.elems() {
		if rank(e.set) != 0 {
			break
		}
		if id, ok := d.hints[e.id()]; ok {
			return id, true
		}
	}
	return 0, false
}

// fullSync converges the kernel (as read in s) to the model: structure
// first, then element differences, then chains no longer used. Elements are
// made before they are broken: what is missing is added first (backends
// before frontends), an element whose value changes is replaced within one
// batch, and only then is what edgelb no longer wants deleted (frontends
// first). So a service whose id changes (an upgrade that gives ids a
// class, a restart that could not keep an id) serves throughout: its
// frontend points at the old id's elements until the new id's exist.
func (d *Dataplane) fullSync(ctx context.Context, s *snapshot) error {
	var pre, post []op
	for _, f := range d.fams {
		p, q := d.syncStructure(f, s.of(f.v6))
		pre = append(pre, p...)
		post = append(post, q...)
	}

	units, dels, adds := d.elemDiff(s, func(setName) bool { return true })
	bs := pack(units, d.budget, d.maxMsgs)
	bs[0].pre = pre
	bs[len(bs)-1].post = post
	if len(pre)+dels+adds+len(post) > 0 {
		d.opts.Log.Info("nft: sync", "table", d.opts.Table, "structural", len(pre), "deletes", dels,
			"adds", adds, "chains-removed", len(post))
	}
	return d.flush(ctx, bs)
}

// elemDiff turns the differences between the model's elements and those of
// snapshot s into batch units, for the sets in (all static sets when s holds
// them all). The kernel's maps are consumed as they match, so what is left
// over is what edgelb no longer wants.
func (d *Dataplane) elemDiff(s *snapshot, in func(setName) bool) (units []unit, ndel, nadd int) {
	var dels []elem
	var adds elemGroups
	if s.empty() {
		// A cold start (or sets flushed by hand) adds every element of the
		// sets read: size each group once instead of growing it (at
		// 100,000 elements the copies of a growing slice were 5 % of a
		// cold sync's CPU). A bound per family: every backend bucket, one
		// element per service in each other set (capacity never written
		// is never touched). Otherwise few differ, and full-size groups
		// would only cost memory.
		var buckets, svcs [2]int
		for _, st := range d.svcs {
			f := 0
			if st.v6 {
				f = 1
			}
			svcs[f]++
			if in(setName{st.v6, setBE}) {
				buckets[f] += st.buckets()
			}
		}
		for f, v6 := range []bool{false, true} {
			for _, set := range []string{setVIP, setNP, setDispatch, setPost} {
				adds[groupOf(&elem{v6: v6, set: set})] = make([]elem, 0, svcs[f])
			}
			adds[groupOf(&elem{v6: v6, set: setBE})] = make([]elem, 0, buckets[f])
		}
	}
	replace := map[string]bool{} // elem.id() of elements whose value changes
	add := func(e elem) {
		if !in(setName{e.v6, e.set}) {
			return
		}
		have := s.of(e.v6).elems[e.set]
		if v, ok := have[string(e.key)]; ok {
			delete(have, string(e.key))
			if v == e.value() {
				return
			}
			replace[e.id()] = true
		}
		adds.add(e)
		nadd++
	}
	var buf []elem
	for _, st := range d.svcs {
		buf = st.appendElems(buf[:0])
		for _, e := range buf {
			add(e)
		}
	}
	for a := range d.nodes {
		add(nodeElem(a))
	}
	for _, f := range d.fams {
		for _, set := range staticSets {
			if !in(setName{f.v6, set}) {
				continue
			}
			for k := range s.of(f.v6).elems[set] {
				dels = append(dels, elem{v6: f.v6, set: set, key: []byte(k)})
			}
		}
	}
	dels = sortedElems(dels, false)
	units = make([]unit, 0, len(dels)+nadd)
	for _, grp := range adds.ordered(true) {
		for i := range grp {
			// One-element sub-slices of a group: no allocation per
			// element. Not capped, so pack can see that consecutive
			// units' elements are consecutive in the group and give a
			// batch that range (no one appends to a unit's slices).
			u := unit{add: grp[i : i+1]}
			if len(replace) > 0 && replace[grp[i].id()] { // id() allocates: not for a cold sync
				u.del = u.add
			}
			units = append(units, u)
		}
	}
	for i := range dels {
		units = append(units, unit{del: dels[i : i+1]})
	}
	return units, len(dels), nadd
}

// partialSync repairs the elements of the given sets only, from a snapshot
// holding just those (readSets): what foreign transactions that added or
// deleted elements, and did nothing else to edgelb's tables, can have
// changed (monitor.elementsOnly).
func (d *Dataplane) partialSync(ctx context.Context, sets map[setName]bool) error {
	s, err := d.readSets(sets)
	if err != nil {
		return err
	}
	units, dels, adds := d.elemDiff(s, func(n setName) bool { return sets[n] })
	if len(units) == 0 {
		return nil
	}
	d.opts.Log.Info("nft: repair of elements changed by others", "table", d.opts.Table, "sets", len(sets), "deletes", dels, "adds", adds)
	return d.flush(ctx, pack(units, d.budget, d.maxMsgs))
}

// syncStructure returns the writes that restore one table's structure
// (table, sets, chains, edgelb's rules) and delete pick chains no longer used.
func (d *Dataplane) syncStructure(f fam, ts *tableSnap) (pre, post []op) {
	t := d.tableOf(f.v6)
	if !ts.exists {
		pre = append(pre, op{1, func(c *nftables.Conn) error { c.AddTable(t); return nil }})
	}
	for _, set := range f.setDefs(t) {
		if !ts.sets[set.Name] {
			pre = append(pre, op{1, func(c *nftables.Conn) error {
				if err := c.AddSet(set, nil); err != nil {
					return fmt.Errorf("nft: encode %s set %s: %w", f, set.Name, err)
				}
				return nil
			}})
		}
	}
	chains := baseChains(t)
	var dyn []famChain
	for fc := range d.chains {
		if fc.v6 == f.v6 {
			dyn = append(dyn, fc)
		}
	}
	sortChains(dyn)
	for _, fc := range dyn {
		chains = append(chains, &nftables.Chain{Table: t, Name: fc.name})
	}
	want := map[string]bool{}
	for _, ch := range chains {
		want[ch.Name] = true
		if !ts.chains[ch.Name] {
			pre = append(pre, d.addChain(f, ch))
			continue
		}
		if fix, ok := repairRules(t, ch.Name, f.rulesOf(ch.Name), ts.rules[ch.Name]); ok {
			pre = append(pre, fix)
		}
	}
	for name := range ts.chains {
		_, isPick := parsePick(name)
		_, isPost := parsePost(name)
		if (isPick || isPost) && !want[name] {
			post = append(post, d.delChain(f, name))
		}
	}
	return pre, post
}
