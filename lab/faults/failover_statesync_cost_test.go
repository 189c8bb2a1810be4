//go:build failover

package faults

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Issue 16: "1,000 new connections/s synced costs each gateway < 5 % of a
// core". With EDGELB_STATESYNC_COST=1 (lab/bench.sh sets it; make test does
// not, the figure needs a quiet machine), TestFailoverStateful's sync=on
// cases open short connections through the VIP at sfCostRate for
// sfCostWindow before the kill, and time on every gateway the CPU of edgelb
// and of the conntrackd it supervises: the owner sends every new, updated
// and destroyed entry, the others receive them into their external cache.
const (
	sfCostRate   = 1000 // new connections per second
	sfCostWindow = 10 * time.Second
	sfCostIdle   = 5 * time.Second // the baseline before it
	sfCostGoal   = 5.0             // % of one core, per gateway
)

func sfSyncCostWanted() bool { return os.Getenv("EDGELB_STATESYNC_COST") == "1" }

// sfSyncCost opens sfCostRate connections/s (each connects, then closes:
// conntrack's new and destroy events, the FTFW traffic that matters) and
// prints one MEASURED line per gateway.
func sfSyncCost(t *testing.T, c sfCase, client *netns.NS, dst string, gws []*sfGateway, owner *sfGateway) {
	t.Helper()
	type sample struct{ edgelb, ctd time.Duration }
	read := func() []sample {
		out := make([]sample, len(gws))
		for i, g := range gws {
			if !g.running() {
				continue
			}
			pid := g.cmd.Process.Pid
			out[i].edgelb = procCPU(pid)
			for _, k := range childPIDs(pid, "conntrackd") {
				out[i].ctd += procCPU(k)
			}
		}
		return out
	}
	// The same processes without new connections first (the streams keep
	// flowing): what a gateway costs anyway (memberlist, ARP, timers), so
	// the line says how much of the total the sync adds.
	idle0, i0 := read(), time.Now()
	time.Sleep(sfCostIdle)
	idle1, iel := read(), time.Since(i0)
	var opened, failed atomic.Int64
	var wg sync.WaitGroup
	before, t0 := read(), time.Now()
	tick := time.NewTicker(time.Second / sfCostRate)
	for time.Since(t0) < sfCostWindow {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cn, err := client.DialContext(ctx, "tcp", dst)
			if err != nil {
				failed.Add(1)
				return
			}
			opened.Add(1)
			cn.Close()
		}()
	}
	tick.Stop()
	wg.Wait()
	el := time.Since(t0)
	after := read()
	sync := fmt.Sprintf("%.0f/s", float64(opened.Load())/el.Seconds())
	worst := 0.0
	for i, g := range gws {
		role := "backup"
		if g == owner {
			role = "owner"
		}
		e := 100 * (after[i].edgelb - before[i].edgelb).Seconds() / el.Seconds()
		k := 100 * (after[i].ctd - before[i].ctd).Seconds() / el.Seconds()
		idle := 100 * ((idle1[i].edgelb - idle0[i].edgelb) + (idle1[i].ctd - idle0[i].ctd)).Seconds() / iel.Seconds()
		worst = max(worst, e+k)
		t.Logf("MEASURED statesync-cost gateways=%d method=%s family=%s gateway=%s role=%s new_conns=%s window_s=%.1f failed=%d edgelb_pct_core=%.2f conntrackd_pct_core=%.2f total_pct_core=%.2f idle_total_pct_core=%.2f added_pct_core=%.2f (goal < %.0f%% total; load %s)",
			c.gateways, c.method, c.family(), g.name, role, sync, el.Seconds(), failed.Load(), e, k, e+k, idle, e+k-idle, sfCostGoal, netns.Loadavg())
	}
	verdict := "met"
	if worst >= sfCostGoal {
		verdict = "MISSED"
	}
	t.Logf("MEASURED statesync-cost gateways=%d method=%s family=%s worst_total_pct_core=%.2f goal=%.0f verdict=%s", c.gateways, c.method, c.family(), worst, sfCostGoal, verdict)
}
