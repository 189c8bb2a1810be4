package engine

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// firstError returns what a loop in order stops at, however the items are
// spread: every size around the spreading thresholds, failures anywhere.
func TestFirstErrorAsLoop(t *testing.T) {
	for _, n := range []int{0, 1, parallelMin - 1, 2 * parallelMin, 2*parallelMin + 1, 5*parallelMin + 7} {
		fails := []map[int]bool{{}, {0: true}, {n - 1: true}, {n / 2: true, n - 1: true}, {1: true, n / 3: true, n / 2: true}}
		for _, fail := range fails {
			var calls atomic.Int64
			i, err := firstError(n, func(i int) error {
				calls.Add(1)
				if fail[i] {
					return fmt.Errorf("item %d", i)
				}
				return nil
			})
			want := -1
			for j := range n {
				if fail[j] {
					want = j
					break
				}
			}
			switch {
			case want < 0 && (i != -1 || err != nil):
				t.Errorf("n=%d, none fails: got %d, %v", n, i, err)
			case want >= 0 && (i != want || err == nil || err.Error() != fmt.Sprintf("item %d", want)):
				t.Errorf("n=%d, fails %v: got %d, %v; want %d", n, fail, i, err, want)
			}
			if want < 0 && calls.Load() != int64(n) {
				t.Errorf("n=%d: %d calls, want every item once", n, calls.Load())
			}
		}
	}
}
