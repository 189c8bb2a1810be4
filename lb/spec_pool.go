package lb

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/fielderr"
)

// ParsePool turns a pool as written into a Pool and checks it on its own
// (Validate): every problem at once, as *Errors with paths relative to the
// pool; a range holding one of own (the gateway's own addresses, nil for
// none) is refused. Overlaps with other pools are the caller's (CheckPools, or the
// writer's CheckOverlap).
func ParsePool(in *PoolInput, own *OwnAddrs) (Pool, error) {
	var c fielderr.Collector
	p := ConvertPool(&c, "", in)
	CheckPool(&c, "", &p, own)
	return p, c.Err()
}

// ConvertPool is ParsePool's first half for a caller with its own
// collector: every field's syntax, reported under path.
func ConvertPool(c *fielderr.Collector, path string, in *PoolInput) Pool {
	p := Pool{Name: in.Name, AutoAssign: in.AutoAssign == nil || *in.AutoAssign, AvoidBuggyIPs: in.AvoidBuggyIPs,
		Allocation: in.ServiceAllocation}
	if p.Allocation != nil {
		p.Allocation.Normalize()
	}
	for i, s := range in.Addresses {
		r, err := ParseRange(s)
		if err != nil {
			c.AddErr(fielderr.Index(fielderr.Join(path, "addresses"), i), s, err)
			continue
		}
		p.Ranges = append(p.Ranges, r)
	}
	if a := in.Advertisement; a != nil {
		p.Advertisement = Advertisement{Communities: a.Communities, LargeCommunities: a.LargeCommunities}
		if a.LocalPref < 0 || a.LocalPref > 1<<32-1 {
			c.Add(fielderr.Join(path, "advertisement.localPref"), fmt.Sprint(a.LocalPref), "out of range 0-4294967295")
		} else {
			p.Advertisement.LocalPref = uint32(a.LocalPref)
		}
		for _, f := range []struct {
			name string
			v    int64
			dst  *int
		}{{"aggregationLength", a.AggregationLength, &p.Advertisement.AggregationLen},
			{"aggregationLengthV6", a.AggregationLengthV6, &p.Advertisement.AggregationLenV6}} {
			if f.v < 0 || f.v > MaxAggregationLen {
				c.Add(fielderr.Join(path, "advertisement."+f.name), fmt.Sprint(f.v), "out of range 0-%d", MaxAggregationLen)
			} else {
				*f.dst = int(f.v)
			}
		}
	}
	if a := in.Announce; a != nil {
		p.Announce = Announce{Announcers: a.Announcers, Peers: a.Peers, Interfaces: a.Interfaces}
	}
	return p
}

// PoolInputOf renders a pool in the input schema.
func PoolInputOf(p Pool) PoolInput {
	auto := p.AutoAssign
	in := PoolInput{Name: p.Name, Addresses: p.RangeStrings(), AutoAssign: &auto, AvoidBuggyIPs: p.AvoidBuggyIPs,
		ServiceAllocation: p.Allocation}
	a := p.Advertisement
	if len(a.Communities) > 0 || len(a.LargeCommunities) > 0 || a.LocalPref != 0 || a.AggregationLen != 0 || a.AggregationLenV6 != 0 {
		in.Advertisement = &AdvertisementInput{Communities: a.Communities, LargeCommunities: a.LargeCommunities,
			LocalPref: int64(a.LocalPref), AggregationLength: int64(a.AggregationLen), AggregationLengthV6: int64(a.AggregationLenV6)}
	}
	if an := p.Announce; !an.IsZero() {
		in.Announce = &PoolAnnounceInput{Announcers: an.Announcers, Peers: an.Peers, Interfaces: an.Interfaces}
	}
	return in
}

// Validate checks a pool on its own: name, at least one range, address
// classes, no range overlapping another of the same pool, BGP attributes,
// serviceAllocation. nil or *Errors with every problem. Own addresses are
// the writers' to check (CheckPool with an OwnAddrs): they change while a
// pool stays.
func (p *Pool) Validate() error {
	var c fielderr.Collector
	CheckPool(&c, "", p, nil)
	return c.Err()
}

// ValidatePool is Validate also refusing a range that holds one of own
// (the gateway's own addresses; nil: none).
func ValidatePool(p *Pool, own *OwnAddrs) error {
	var c fielderr.Collector
	CheckPool(&c, "", p, own)
	return c.Err()
}

// CheckPool is Validate for a caller with its own collector (paths under
// path), also refusing a range that holds one of own (nil: none).
func CheckPool(c *fielderr.Collector, path string, p *Pool, own *OwnAddrs) {
	at := func(f string) string { return fielderr.Join(path, f) }
	if err := ValidateName(p.Name); err != nil {
		c.AddErr(at("name"), p.Name, err)
	}
	if len(p.Ranges) == 0 && !c.Failed(at("addresses")) {
		c.Add(at("addresses"), "", "a pool needs at least one address range")
	}
	var ok []rangeRef
	for i, r := range p.Ranges {
		if err := CheckRange(r); err != nil {
			c.AddErr(fielderr.Index(at("addresses"), i), r.String(), err)
			continue
		}
		if err := own.CheckRange(r); err != nil {
			c.AddErr(fielderr.Index(at("addresses"), i), r.String(), err)
			continue
		}
		ok = append(ok, rangeRef{r: r, idx: i})
	}
	sweepOverlaps(ok, func(first, second *rangeRef) {
		c.Add(fielderr.Index(at("addresses"), second.idx), second.r.String(), "overlaps %q of the same pool (addresses[%d])", first.r.String(), first.idx)
	})
	adv := &p.Advertisement
	for i, s := range adv.Communities {
		if _, named := announce.WellKnownCommunities[s]; !named && !numbers(s, 2, 16) {
			c.Add(fielderr.Index(at("advertisement.communities"), i), s,
				"want ASN:VALUE (two 16-bit numbers, like 65000:100) or a well-known name (no-export, no-advertise, blackhole...)")
		}
	}
	for i, s := range adv.LargeCommunities {
		if !numbers(s, 3, 32) {
			c.Add(fielderr.Index(at("advertisement.largeCommunities"), i), s, "want GLOBAL:LOCAL1:LOCAL2 (three 32-bit numbers, like 65000:1:2)")
		}
	}
	if !c.Failed(at("addresses")) {
		checkAggregation(c, path, p)
	}
	checkAnnounce(c, path, p)
	if err := ValidateAllocation(p.Allocation); err != nil {
		addPrefixed(c, path, err)
	}
}

// addPrefixed records a *FieldError from a first-error check under path.
func addPrefixed(c *fielderr.Collector, path string, err error) {
	if fe, ok := err.(*FieldError); ok {
		c.AddErr(fielderr.Join(path, fe.Field), fe.Value, fe.Err)
		return
	}
	c.AddErr(path, "", err)
}

// numbers reports whether s is n colon-separated unsigned numbers of bits bits.
func numbers(s string, n, bits int) bool {
	parts := strings.Split(s, ":")
	if len(parts) != n {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, bits); err != nil {
			return false
		}
	}
	return true
}

type rangeRef struct {
	r         Range
	pool, idx int
}

// CheckPools checks a list of pools against each other (a config file's):
// names unique, no range overlapping another pool's. Overlaps are found by
// sort and sweep (n log n: a generated file with thousands of ranges stays
// fast); each is reported on whichever range comes later.
func CheckPools(c *fielderr.Collector, path string, pools []Pool) {
	names := map[string]int{}
	var all []rangeRef
	for i := range pools {
		p := &pools[i]
		if j, dup := names[p.Name]; dup && p.Name != "" {
			c.Add(fielderr.Index(path, i)+".name", p.Name, "duplicate pool name (also %s)", fielderr.Index(path, j))
		} else {
			names[p.Name] = i
		}
		for j, r := range p.Ranges {
			if CheckRange(r) == nil {
				all = append(all, rangeRef{r: r, pool: i, idx: j})
			}
		}
	}
	sweepOverlaps(all, func(first, second *rangeRef) {
		if first.pool != second.pool {
			c.Add(fielderr.Index(fielderr.Index(path, second.pool)+".addresses", second.idx), second.r.String(),
				"overlaps %q of pool %q (%s.addresses[%d])", first.r.String(), pools[first.pool].Name, fielderr.Index(path, first.pool), first.idx)
		}
	})
}

// sweepOverlaps calls report for each range that overlaps one before it
// (in pool and index order), sorting first (n log n).
func sweepOverlaps(all []rangeRef, report func(first, second *rangeRef)) {
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].r.Is4() != all[b].r.Is4() {
			return all[a].r.Is4()
		}
		if c := all[a].r.First.Compare(all[b].r.First); c != 0 {
			return c < 0
		}
		if all[a].pool != all[b].pool {
			return all[a].pool < all[b].pool
		}
		return all[a].idx < all[b].idx
	})
	var reach *rangeRef // the range reaching furthest so far, same family
	for k := range all {
		cur := &all[k]
		if reach != nil && reach.r.Is4() == cur.r.Is4() && reach.r.Overlaps(cur.r) {
			first, second := reach, cur
			if second.pool < first.pool || second.pool == first.pool && second.idx < first.idx {
				first, second = second, first
			}
			report(first, second)
		}
		if reach == nil || reach.r.Is4() != cur.r.Is4() || reach.r.Last.Less(cur.r.Last) {
			reach = cur
		}
	}
}
