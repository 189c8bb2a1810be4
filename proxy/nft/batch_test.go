package nft

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// groupMsgs counts the messages writeElems sends for es after sortedElems:
// one per maxMsgElems elements of each contiguous (family, set) run.
func groupMsgs(es []elem, adds bool) int {
	es = sortedElems(es, adds)
	n := 0
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].set == es[i].set && es[j].v6 == es[i].v6 && j-i < maxMsgElems {
			j++
		}
		n++
		i = j
	}
	return n
}

// TestPackBoundsMessages: every batch stays within the byte budget and the
// message limit, its count is exactly what writeElems sends, units stay
// whole and nothing is lost or reordered.
func TestPackBoundsMessages(t *testing.T) {
	var units []unit
	total := 0
	for i := 0; i < 3000; i++ {
		id := idTag + 1 + uint32(i)
		u := unit{add: []elem{
			{v6: i%3 == 0, set: setVIP, key: encU32(id), val: encU32(id)},
			{v6: i%3 == 0, set: setDispatch, key: encU32(id), chain: "pick-r2"},
			{v6: i%3 == 0, set: setPost, key: encU32(id), chain: "post-m"},
			{v6: i%3 == 0, set: setBE, key: encBucketKey(id, 0), val: []byte{1, 2, 3, 4, 0, 80}},
			{v6: i%3 == 0, set: setBE, key: encBucketKey(id, 1), val: []byte{1, 2, 3, 5, 0, 80}},
		}}
		if i%7 == 0 {
			u.del = []elem{{set: setBE, key: encBucketKey(id, 2)}}
		}
		units = append(units, u)
		total += len(u.add) + len(u.del)
	}
	for _, tc := range []struct{ budget, maxMsgs int }{{1 << 20, 8192}, {1 << 20, 20}, {16 << 10, 8192}, {1 << 20, 1}} {
		bs := pack(units, tc.budget, tc.maxMsgs)
		got, next := 0, 0
		for i, b := range bs {
			want := groupMsgs(b.del, false) + groupMsgs(b.add, true)
			if b.msgs.msgs != want {
				t.Errorf("budget %d max %d: batch %d counts %d messages, writeElems sends %d", tc.budget, tc.maxMsgs, i, b.msgs.msgs, want)
			}
			// A batch over a limit holds one unit (it cannot be split).
			one := len(b.add) == len(units[next].add) && len(b.del) == len(units[next].del)
			if (b.msgs.msgs > tc.maxMsgs || b.bytes > tc.budget) && !one {
				t.Errorf("budget %d max %d: batch %d has %d messages, %d bytes", tc.budget, tc.maxMsgs, i, b.msgs.msgs, b.bytes)
			}
			// Units whole and in order.
			a, d := 0, 0
			for a < len(b.add) {
				u := units[next]
				for k, e := range u.add {
					if string(b.add[a+k].key) != string(e.key) {
						t.Fatalf("batch %d: unit %d split or reordered", i, next)
					}
				}
				a += len(u.add)
				d += len(u.del)
				next++
			}
			if d != len(b.del) {
				t.Fatalf("batch %d: %d deletes, units hold %d", i, len(b.del), d)
			}
			got += len(b.add) + len(b.del)
		}
		if got != total || next != len(units) {
			t.Errorf("budget %d max %d: %d elements in %d units packed, want %d in %d", tc.budget, tc.maxMsgs, got, next, total, len(units))
		}
		t.Logf("budget %d, max %d messages: %d batches", tc.budget, tc.maxMsgs, len(bs))
	}
}

// TestSortElemsStable: sortedElems orders as a stable sort by (rank, family,
// set) does — the order writeElems and msgCount rely on — for random mixes
// of every set, both families, adds and deletes, and names it does not know.
func TestSortElemsStable(t *testing.T) {
	sets := []string{setVIP, setNP, setNodes, setDispatch, setBE, setPost, setAff, "zz-other", "a-other"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 500; round++ {
		n := rng.IntN(300)
		es := make([]elem, n)
		for i := range es {
			k := rng.IntN(len(sets))
			if round%2 == 0 {
				k = rng.IntN(len(sets) - 2) // edgelb's own sets only
			}
			es[i] = elem{v6: rng.IntN(2) == 0, set: sets[k], key: encU32(uint32(i))}
		}
		for _, adds := range []bool{false, true} {
			want := slices.Clone(es)
			slices.SortStableFunc(want, elemOrder(adds))
			orig := slices.Clone(es)
			got := sortedElems(es, adds)
			if !slices.EqualFunc(es, orig, sameElem) {
				t.Fatalf("round %d: sortedElems changed its input", round)
			}
			for i := range want {
				if got[i].set != want[i].set || got[i].v6 != want[i].v6 || !bytes.Equal(got[i].key, want[i].key) {
					t.Fatalf("round %d adds=%v: element %d is %s/%v/%x, want %s/%v/%x", round, adds, i,
						got[i].set, got[i].v6, got[i].key, want[i].set, want[i].v6, want[i].key)
				}
			}
		}
	}
}

// TestElemGroupsOrderAsSort: elements gathered into elemGroups come out,
// group after group, in the order a stable sort by (rank, family, set)
// gives — with names edgelb does not use too.
func TestElemGroupsOrderAsSort(t *testing.T) {
	sets := []string{setVIP, setNP, setNodes, setDispatch, setBE, setPost, setAff, "zz-other", "a-other"}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 500; round++ {
		es := make([]elem, rng.IntN(300))
		for i := range es {
			k := rng.IntN(len(sets))
			if round%2 == 0 {
				k = rng.IntN(len(sets) - 2)
			}
			es[i] = elem{v6: rng.IntN(2) == 0, set: sets[k], key: encU32(uint32(i))}
		}
		for _, adds := range []bool{false, true} {
			var g elemGroups
			for _, e := range es {
				g.add(e)
			}
			var got []elem
			for _, grp := range g.ordered(adds) {
				got = append(got, grp...)
			}
			want := slices.Clone(es)
			slices.SortStableFunc(want, elemOrder(adds))
			if !slices.EqualFunc(got, want, sameElem) {
				t.Fatalf("round %d adds=%v: groups give another order than the stable sort", round, adds)
			}
		}
	}
}

// TestPackAliasesConsecutiveUnits: units whose elements follow one another
// in one array (elemDiff's) give batches that are ranges of that array —
// capped, so an append cannot write into it — and any other units give a
// copy; either way each batch holds exactly its units' elements in order.
func TestPackAliasesConsecutiveUnits(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 18))
	for round := 0; round < 200; round++ {
		n := 1 + r.IntN(300)
		arr := make([]elem, n)
		for i := range arr {
			id := idTag + 1 + uint32(i)
			arr[i] = elem{set: setBE, key: encBucketKey(id, 0), val: []byte{1, 2, 3, 4, 0, 80}}
		}
		var units []unit
		aliased := r.IntN(2) == 0
		for i := 0; i < n; {
			k := min(n-i, 1+r.IntN(3))
			u := unit{add: arr[i : i+k]}
			if !aliased && r.IntN(4) == 0 {
				u.add = slices.Clone(u.add) // from another array: the batch must copy
			}
			if r.IntN(10) == 0 {
				u.del = u.add // a replaced element: deleted and added in one unit
			}
			units = append(units, u)
			i += k
		}
		bs := pack(units, 1+r.IntN(4096), 1+r.IntN(8))
		next := 0
		for _, b := range bs {
			var wantAdd, wantDel []elem
			for len(wantAdd) < len(b.add) {
				wantAdd = append(wantAdd, units[next].add...)
				wantDel = append(wantDel, units[next].del...)
				next++
			}
			if !slices.EqualFunc(b.add, wantAdd, sameElem) || !slices.EqualFunc(b.del, wantDel, sameElem) {
				t.Fatalf("round %d: a batch holds other elements than its units'", round)
			}
			if len(b.add) > 0 && cap(b.add) != len(b.add) {
				t.Fatalf("round %d: a batch's adds have room to append into (%d of %d)", round, len(b.add), cap(b.add))
			}
			if aliased && len(b.add) > 0 && !sharesArray(b.add, arr) {
				t.Fatalf("round %d: consecutive units' elements were copied", round)
			}
		}
		if next != len(units) {
			t.Fatalf("round %d: %d of %d units in batches", round, next, len(units))
		}
	}
}

func sameElem(a, b elem) bool {
	return a.v6 == b.v6 && a.set == b.set && bytes.Equal(a.key, b.key) && bytes.Equal(a.val, b.val) && a.chain == b.chain
}

// sharesArray reports whether s is a range of arr.
func sharesArray(s, arr []elem) bool {
	for i := range arr {
		if &arr[i] == &s[0] {
			return true
		}
	}
	return false
}
