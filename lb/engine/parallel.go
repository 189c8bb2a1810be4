package engine

import (
	"runtime"
	"sync"
)

// parallelMin is how many items each goroutine of firstError takes at
// least: below it, starting goroutines costs more than it saves.
const parallelMin = 512

// firstError runs f(0) … f(n-1), spread over the cores when n is large,
// and returns the lowest index whose f failed, with its error — the error
// a loop in order would have stopped at, so the result does not depend on
// the spreading. f(i) may touch only item i and what no f writes. At
// start-up SyncConfig validates 10,000 services this way (each validation
// reads only its own spec and the shared, read-only ValidateOptions).
func firstError(n int, f func(i int) error) (int, error) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelMin)
	if workers < 2 {
		for i := range n {
			if err := f(i); err != nil {
				return i, err
			}
		}
		return -1, nil
	}
	type failure struct {
		i   int
		err error
	}
	first := make([]failure, workers) // per worker: its lowest failing index
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		first[w].i = -1
		wg.Add(1)
		go func(w, from, to int) {
			defer wg.Done()
			for i := from; i < to; i++ {
				if err := f(i); err != nil {
					first[w] = failure{i, err}
					return
				}
			}
		}(w, w*per, min((w+1)*per, n))
	}
	wg.Wait()
	for _, fl := range first { // workers cover ascending ranges
		if fl.i >= 0 {
			return fl.i, fl.err
		}
	}
	return -1, nil
}
