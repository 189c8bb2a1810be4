package nft

import "testing"

// The monitor's verdict for a generation range, step by step: what it saw
// (transactions, foreign touches, losses) against what the resync asks.
func TestMonitorQuiet(t *testing.T) {
	m := &monitor{}
	steps := []struct {
		do       func()
		from, to uint32
		quiet    bool
		behind   bool
	}{
		{func() {}, 1, 1, false, true},                                                 // nothing seen yet
		{func() { m.seen, m.lastGen = true, 5 }, 3, 5, true, false},                    // commits 4, 5 left us alone
		{func() {}, 3, 6, false, true},                                                 // 6 not handled yet: wait
		{func() { m.lastGen = 7 }, 3, 6, false, false},                                 // already past 6: read next time
		{func() { m.scopes = append(m.scopes, scope{gen: 7}) }, 5, 7, false, false},    // 7 touched our tables
		{func() {}, 7, 7, true, false},                                                 // since 7: nothing
		{func() { m.lastGen = 9; m.losses = [][2]uint32{{7, 9}} }, 7, 9, false, false}, // 8..9 may have been lost
		{func() { m.lastGen = 12 }, 9, 12, true, false},                                // the loss lies before 10
		{func() { m.lastGen = 13; m.losses = append(m.losses, [2]uint32{12, 13}) }, 11, 13, false, false},
		{func() { m.broken = true }, 13, 13, false, false}, // a broken monitor vouches for nothing
	}
	for i, s := range steps {
		s.do()
		q, b := m.quiet(s.from, s.to)
		if q != s.quiet || b != s.behind {
			t.Errorf("step %d: quiet(%d, %d) = %v, behind %v; want %v, %v", i, s.from, s.to, q, b, s.quiet, s.behind)
		}
	}
}

// elementsOnly: the union of the touched sets of every foreign transaction
// in (from, to], or not ok when one was structural, notifications may have
// been lost, or the range reaches past what the monitor remembers.
func TestMonitorElementsOnly(t *testing.T) {
	vip, be := setName{name: setVIP}, setName{name: setBE}
	m := &monitor{seen: true, lastGen: 10, scopes: []scope{
		{gen: 4, structural: true},
		{gen: 6, sets: map[setName]bool{vip: true}},
		{gen: 8, sets: map[setName]bool{be: true}},
	}}
	for _, c := range []struct {
		from, to uint32
		ok       bool
		sets     int
	}{{5, 10, true, 2}, {7, 10, true, 1}, {8, 10, true, 0}, {3, 10, false, 0}, {5, 9, false, 0}} {
		sets, ok := m.elementsOnly(c.from, c.to)
		if ok != c.ok || len(sets) != c.sets {
			t.Errorf("elementsOnly(%d, %d) = %v, %v; want %d sets, %v", c.from, c.to, sets, ok, c.sets, c.ok)
		}
	}
	m.scopeFloor = 6 // transactions up to 6 forgotten
	if _, ok := m.elementsOnly(5, 10); ok {
		t.Error("a range reaching past the remembered transactions was vouched for")
	}
	m.losses = [][2]uint32{{8, 9}}
	if _, ok := m.elementsOnly(7, 10); ok {
		t.Error("a range with lost notifications was vouched for")
	}
}
