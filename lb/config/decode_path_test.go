package config

import (
	"math/rand/v2"
	"testing"
)

// TestFieldPathRendersAsJoinAndIndex: the lazily rendered path of any
// sequence of steps (keys, empty keys among them, and list indexes) is the
// string the eager join and index calls built before.
func TestFieldPathRendersAsJoinAndIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	keys := []string{"", "services", "backends", "address", "x.y", "[0]"}
	for n := 0; n < 20000; n++ {
		var p fieldPath
		want := ""
		for range r.IntN(6) {
			if r.IntN(3) == 0 {
				i := r.IntN(12)
				p.index(i)
				want = index(want, i)
			} else {
				k := keys[r.IntN(len(keys))]
				p.key(k)
				want = join(want, k)
			}
		}
		if got := p.String(); got != want {
			t.Fatalf("steps %+v render %q, join/index built %q", p.steps, got, want)
		}
		for len(p.steps) > 0 {
			p.pop()
		}
		if p.String() != "" {
			t.Fatal("the root renders as empty")
		}
	}
}
