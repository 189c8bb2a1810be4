package nftgen

import "testing"

// TestGate: a write settles the gate only when it started from a trusted
// state and the generation moved by exactly the writer's own commits; a
// known generation advances, an unknown one stays unknown.
func TestGate(t *testing.T) {
	var g Gate
	if _, ok := g.Clean(); ok {
		t.Fatal("a new gate is clean")
	}
	g.Advance(5)
	if _, ok := g.Clean(); ok {
		t.Fatal("Advance made an unknown gate clean")
	}
	g.Settle(true, 10, 12, 2)
	if !g.CleanAt(12) || g.CleanAt(10) {
		t.Fatalf("after our 2 commits 10 → 12: %+v, want clean at 12", g)
	}
	g.Settle(true, 12, 14, 1) // someone else committed too
	if _, ok := g.Clean(); ok {
		t.Fatalf("a foreign commit left the gate clean: %+v", g)
	}
	g.Settle(false, 14, 15, 1) // not trusted before the write
	if _, ok := g.Clean(); ok {
		t.Fatalf("an untrusted write made the gate clean: %+v", g)
	}
	g.Settle(true, 15, 15, 0)
	g.Advance(20)
	if !g.CleanAt(20) {
		t.Fatalf("Advance of a clean gate: %+v, want clean at 20", g)
	}
	g.Forget()
	if g.CleanAt(20) {
		t.Fatal("Forget left the gate clean")
	}
}

// TestDecode: NFTA_GEN_ID (type 1, big endian) after the 4-byte nfgenmsg.
func TestDecode(t *testing.T) {
	msg := []byte{0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 1, 2}
	if g, ok := Decode(msg); !ok || g != 0x102 {
		t.Fatalf("Decode = %d, %v, want 258, true", g, ok)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0, 8, 0, 2, 0, 0, 0, 1, 2}} {
		if g, ok := Decode(bad); ok {
			t.Fatalf("Decode(%v) = %d, true", bad, g)
		}
	}
}
