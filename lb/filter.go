package lb

import "context"

// RunFilter is the loop of a stage between a writer's Desired stream and
// the effects loop (the node-health filter, the own-address filter): it
// passes the latest state from in to out, through apply, and applies the
// last state again whenever changed fires (the stage's own input moved),
// until ctx ends. Latest wins: out should have a buffer of one, and a state
// its reader has not taken yet is replaced. Call it once per out.
func RunFilter(ctx context.Context, in <-chan Desired, out chan Desired, changed <-chan struct{}, apply func(Desired) Desired) {
	var cur Desired
	have := false
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-in:
			cur, have = d, true
		case <-changed:
			if !have {
				continue
			}
		}
		f := apply(cur)
		select {
		case <-out:
		default:
		}
		out <- f
	}
}
