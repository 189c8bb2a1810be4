package lb

import (
	"encoding/binary"
	"math"
	"net/netip"

	"github.com/google/btree"
)

// span is an inclusive run of consecutive used addresses.
type span struct{ lo, hi netip.Addr }

func spanLess(a, b span) bool { return a.lo.Less(b.lo) }

// usedSet records the used addresses of one range as merged runs in a
// B-tree. Memory grows with the number of runs (at most the number of used
// addresses), never with the size of the range, so a /64 costs as little as
// a /30; every operation is O(log runs), so no call scans the range.
type usedSet struct {
	t *btree.BTreeG[span]
}

func newUsedSet() usedSet { return usedSet{t: btree.NewG(16, spanLess)} }

// find returns the run holding a.
func (s usedSet) find(a netip.Addr) (span, bool) {
	var got span
	var ok bool
	s.t.DescendLessOrEqual(span{lo: a}, func(x span) bool {
		got, ok = x, true
		return false
	})
	if !ok || got.hi.Less(a) {
		return span{}, false
	}
	return got, true
}

// add marks a (known to be free) as used, merging with neighbouring runs.
func (s usedSet) add(a netip.Addr) {
	var prev, next span
	var hasPrev, hasNext bool
	s.t.DescendLessOrEqual(span{lo: a}, func(x span) bool {
		prev, hasPrev = x, true
		return false
	})
	if n := a.Next(); n.IsValid() {
		s.t.AscendGreaterOrEqual(span{lo: n}, func(x span) bool {
			next, hasNext = x, true
			return false
		})
	}
	joinPrev := hasPrev && prev.hi.Next() == a
	joinNext := hasNext && a.Next() == next.lo
	switch {
	case joinPrev && joinNext:
		s.t.Delete(next)
		s.t.ReplaceOrInsert(span{prev.lo, next.hi})
	case joinPrev:
		s.t.ReplaceOrInsert(span{prev.lo, a})
	case joinNext:
		s.t.Delete(next)
		s.t.ReplaceOrInsert(span{a, next.hi})
	default:
		s.t.ReplaceOrInsert(span{a, a})
	}
}

// remove marks a (known to be used) as free, splitting its run.
func (s usedSet) remove(a netip.Addr) {
	sp, ok := s.find(a)
	if !ok {
		return
	}
	s.t.Delete(sp)
	if sp.lo.Less(a) {
		s.t.ReplaceOrInsert(span{sp.lo, a.Prev()})
	}
	if a.Less(sp.hi) {
		s.t.ReplaceOrInsert(span{a.Next(), sp.hi})
	}
}

// nextFree returns the first address in [from, last] that is neither used
// nor (when skipBuggy) an IPv4 .0/.255. Each step jumps over a whole run or
// one buggy address, so it never walks used addresses one by one.
func (s usedSet) nextFree(from, last netip.Addr, skipBuggy bool) (netip.Addr, bool) {
	c := from
	for c.IsValid() && c.Compare(last) <= 0 {
		if sp, ok := s.find(c); ok {
			if sp.hi.Compare(last) >= 0 {
				return netip.Addr{}, false
			}
			c = sp.hi.Next()
			continue
		}
		if skipBuggy && isBuggy(c) {
			c = c.Next()
			continue
		}
		return c, true
	}
	return netip.Addr{}, false
}

// isBuggy: an IPv4 address ending in .0 or .255, which some old client
// stacks and CPE firmwares drop as network/broadcast addresses.
func isBuggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	b := a.As4()
	return b[3] == 0 || b[3] == 255
}

// hugeRange is where counting stops: a range this large can never run out
// (every used address costs memory), so its free count is not tracked.
const hugeRange = uint64(1) << 62

// rangeSize returns the number of addresses in r, or huge=true beyond hugeRange.
func rangeSize(r Range) (n uint64, huge bool) {
	f, l := r.First.As16(), r.Last.As16()
	fh, fl := binary.BigEndian.Uint64(f[:8]), binary.BigEndian.Uint64(f[8:])
	lh, ll := binary.BigEndian.Uint64(l[:8]), binary.BigEndian.Uint64(l[8:])
	// l - f as 128 bits.
	dl := ll - fl
	dh := lh - fh
	if ll < fl {
		dh--
	}
	if dh != 0 || dl >= hugeRange-1 {
		return 0, true
	}
	return dl + 1, false
}

// buggyIn counts the .0/.255 addresses inside an IPv4 range.
func buggyIn(r Range) uint64 {
	if !r.Is4() {
		return 0
	}
	f, l := u32(r.First), u32(r.Last)
	n := buggyUpTo(l)
	if f > 0 {
		n -= buggyUpTo(f - 1)
	}
	return n
}

// buggyUpTo counts x in [0, n] whose last byte is 0 or 255.
func buggyUpTo(n uint32) uint64 {
	c := 2*uint64(n>>8) + 1 // every full block of 256 has two; the partial one has .0
	if n&0xff == 0xff {
		c++
	}
	return c
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// rangeState is one range of one pool with its used addresses.
type rangeState struct {
	Range
	pool   *poolState
	used   usedSet
	usable uint64 // addresses the pool may hand out (buggy ones excluded)
	huge   bool   // usable is not tracked: the range cannot be exhausted
	taken  uint64 // used addresses in the range
	// cursor is where the next search starts in Rotate order: it moves past
	// each address handed out, so a just-released VIP (still in ARP caches
	// and conntrack of clients) is not handed to another service at once.
	cursor netip.Addr
}

func newRangeState(r Range, p *poolState) *rangeState {
	rs := &rangeState{Range: r, pool: p, used: newUsedSet(), cursor: r.First}
	n, huge := rangeSize(r)
	if p.AvoidBuggyIPs {
		n -= buggyIn(r)
	}
	rs.usable, rs.huge = n, huge
	return rs
}

func (rs *rangeState) hasFree() bool { return rs.huge || rs.taken < rs.usable }

// usable reports whether the pool may hand out a (a is inside the range).
func (rs *rangeState) usableAddr(a netip.Addr) bool {
	return !(rs.pool.AvoidBuggyIPs && isBuggy(a))
}

// pick returns a free usable address: the lowest one (LowestFree), or in
// Rotate order the first at or after the cursor, wrapping around once.
func (rs *rangeState) pick(order AllocOrder) (netip.Addr, bool) {
	if !rs.hasFree() {
		return netip.Addr{}, false
	}
	skip := rs.pool.AvoidBuggyIPs
	if order == Rotate {
		if a, ok := rs.used.nextFree(rs.cursor, rs.Last, skip); ok {
			return a, true
		}
	}
	return rs.used.nextFree(rs.First, rs.Last, skip)
}

func (rs *rangeState) take(a netip.Addr) {
	rs.used.add(a)
	rs.taken++
	rs.cursor = a.Next()
	if !rs.cursor.IsValid() || rs.Last.Less(rs.cursor) {
		rs.cursor = rs.First
	}
}

func (rs *rangeState) free(a netip.Addr) {
	rs.used.remove(a)
	rs.taken--
}

// poolState is a pool with its ranges and usage.
type poolState struct {
	Pool
	ranges []*rangeState
	size   uint64 // usable addresses, capped at MaxUint64
	used   int    // distinct addresses held
}

func newPoolState(p Pool) *poolState {
	ps := &poolState{Pool: clonePool(p)}
	for i := range ps.Ranges {
		ps.Ranges[i] = Range{First: ps.Ranges[i].First.Unmap(), Last: ps.Ranges[i].Last.Unmap()}
		rs := newRangeState(ps.Ranges[i], ps)
		ps.ranges = append(ps.ranges, rs)
		switch {
		case rs.huge, ps.size > math.MaxUint64-rs.usable:
			ps.size = math.MaxUint64
		default:
			ps.size += rs.usable
		}
	}
	return ps
}

// clonePool deep-copies the slices so callers cannot change the allocator's pools.
func clonePool(p Pool) Pool {
	p.Ranges = append([]Range(nil), p.Ranges...)
	p.Advertisement.Communities = append([]string(nil), p.Advertisement.Communities...)
	p.Advertisement.LargeCommunities = append([]string(nil), p.Advertisement.LargeCommunities...)
	p.Allocation = cloneAllocation(p.Allocation)
	return p
}
