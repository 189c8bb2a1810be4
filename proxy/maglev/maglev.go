// Package maglev builds Maglev lookup tables (Eisenbud et al., "Maglev: A
// Fast and Reliable Software Network Load Balancer", NSDI 2016, §3.4): a
// table of M slots, each naming a backend, filled so that every backend
// holds a share of slots proportional to its weight and a change of one
// backend among N rewrites about 1/N of the slots. A flow hashed to a slot
// therefore reaches the same backend on every gateway holding the same
// backends, and most flows keep their backend when one is added or removed.
//
// The table is a pure function of the backends' identities (address:port)
// and weights and of M: no random seed, no dependence on the order the
// backends are listed in. Two gateways, or one gateway before and after a
// restart, build the same table from the same backends. The hash below is
// part of that contract: changing it changes every table, so gateways
// running different versions would disagree on every flow.
package maglev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
)

// Backend is one backend: its identity and its relative weight. A backend
// with weight 0 gets no slot.
type Backend struct {
	Addr   netip.AddrPort
	Weight uint32
}

// Sizes are the table sizes TableSize chooses from: primes (a permutation
// with any skip in [1, M-1] visits every slot only when M is prime), each
// about four times the one before.
//
// There is no size below 4,093 (IPVS's mh default, 2^12 rounded to a
// prime) although a few backends would fit 251 or 1,021 at 100 slots
// each: a table of another size is another table, so when a backend change
// crosses from one size to the next nearly every flow moves. With 4,093 as
// the floor that happens only past 40 backends (and past 163), not between
// 2 and 3 or 10 and 11 where services live.
var Sizes = []int{4093, 16381, 65537}

// SlotsPerBackend is the number of slots per backend TableSize aims for. The
// paper keeps M ≥ 100·N: a backend's share then differs from its weight's by
// at most about 1 % of a backend's share, and a change of one backend moves
// only a little more than the 1/N of flows it must.
const SlotsPerBackend = 100

// TableSize is the smallest of Sizes with M ≥ SlotsPerBackend × backends
// (4,093 up to 40 backends, 16,381 up to 163), or the largest (65,537) for
// more than 655 backends, where shares and disruption get coarser (the
// table stays a valid table).
func TableSize(backends int) int {
	for _, m := range Sizes {
		if m >= SlotsPerBackend*backends {
			return m
		}
	}
	return Sizes[len(Sizes)-1]
}

// Errors Build returns (wrapped, with the offending value).
var (
	ErrTableSize = errors.New("maglev: table size must be a prime ≥ 2")
	ErrBackend   = errors.New("maglev: invalid backend")
)

// Build returns the lookup table of size m: slot i holds the index into bs
// of its backend, or -1 in every slot when no backend has a weight.
// Backends with weight 0 hold no slot. Each backend must be a valid,
// distinct address:port.
func Build(bs []Backend, m int) ([]int, error) {
	if !isPrime(m) {
		return nil, fmt.Errorf("%w: %d", ErrTableSize, m)
	}
	// Turns are taken in the order of the backends' identities, not of
	// the list, so the same backends in another order give the same table.
	order := make([]int, 0, len(bs))
	seen := make(map[netip.AddrPort]bool, len(bs))
	for i, b := range bs {
		if !b.Addr.IsValid() {
			return nil, fmt.Errorf("%w: backend %d: address %q", ErrBackend, i, b.Addr)
		}
		if seen[b.Addr] {
			return nil, fmt.Errorf("%w: %s listed twice", ErrBackend, b.Addr)
		}
		seen[b.Addr] = true
		if b.Weight > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return bs[a].Addr.Compare(bs[b].Addr) })

	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	if len(order) == 0 {
		return table, nil
	}
	offset := make([]uint64, len(order))
	skip := make([]uint64, len(order))
	weight := make([]uint64, len(order))
	for k, i := range order {
		offset[k], skip[k] = Permutation(bs[i].Addr, m)
		weight[k] = uint64(bs[i].Weight)
	}
	for slot, k := range fill(offset, skip, newTurns(weight), m) {
		table[slot] = order[k]
	}
	return table, nil
}

// Permutation returns the offset and skip of a backend's preference list in
// a table of size m: it prefers slot (offset + j·skip) mod m at its j-th
// choice. Both come from a fixed hash of the address (its 4 or 16 bytes)
// and port (2 bytes, big-endian) — FNV-1a 64, then two different
// SplitMix64 finalisers, since FNV alone spreads nearby addresses poorly.
func Permutation(ap netip.AddrPort, m int) (offset, skip uint64) {
	h := fnv.New64a()
	h.Write(ap.Addr().AsSlice())
	h.Write(binary.BigEndian.AppendUint16(nil, ap.Port()))
	s := h.Sum64()
	offset = mix(s^0x9e3779b97f4a7c15) % uint64(m)
	skip = mix(s^0xc2b2ae3d27d4eb4f)%uint64(m-1) + 1
	return offset, skip
}

// mix is SplitMix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fill is the paper's population loop: backends take turns (next says
// whose), each claiming the first slot of its preference list not yet
// taken, until every slot is. Returns the backend of each slot.
func fill(offset, skip []uint64, next func() int, m int) []int {
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	j := make([]uint64, len(offset)) // each backend's next preference
	for filled := 0; filled < m; filled++ {
		k := next()
		for {
			c := (offset[k] + j[k]*skip[k]) % uint64(m)
			j[k]++
			if table[c] < 0 {
				table[c] = k
				break
			}
		}
	}
	return table
}

// newTurns hands out turns in proportion to the weights, interleaved as
// smooth weighted round-robin does (nginx's): each backend earns its weight
// every turn, the richest takes the turn and pays the total. With equal
// weights that is the paper's plain round-robin; with weights, any run of T
// turns gives backend k its share T·w_k/W to within a few turns, so the M
// slots are split in proportion to the weights however large they are, and
// no weight needs scaling. Ties go to the lower index (identity order).
func newTurns(w []uint64) func() int {
	var total uint64
	for _, x := range w {
		total += x
	}
	cur := make([]int64, len(w))
	return func() int {
		best := 0
		for k, x := range w {
			cur[k] += int64(x)
			if cur[k] > cur[best] {
				best = k
			}
		}
		cur[best] -= int64(total)
		return best
	}
}

func isPrime(m int) bool {
	if m < 2 {
		return false
	}
	for d := 2; d*d <= m; d++ {
		if m%d == 0 {
			return false
		}
	}
	return true
}
