//go:build failover

package faults

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Issue 16: "1,000 new connections/s synced costs each gateway < 5 % of a
// core". With EDGELB_STATESYNC_COST=1 (lab/bench.sh sets it; make test does
// not, the figure needs a quiet machine), TestFailoverStateful's cases open
// short connections through the VIP at sfCostRate for sfCostWindow before
// the kill, and time on every gateway the CPU of edgelb and of the
// conntrackd it supervises: the owner sends every new, updated and
// destroyed entry, the others receive them into their external cache.
// A case with sync=off runs the same gateways and load without stateSync:
// after the pair of a case ran (on first, then off), one line says what
// the sync costs each gateway, on minus off in the same role — the
// verdict; the totals are in the lines of each case.
const (
	sfCostRate = 1000 // new connections per second
	// 20 s: the daemon's periodic work (the web UI's flow snapshot every
	// 10 s, memberlist's push-pull every 5 s) lands in every window alike.
	sfCostWindow = 20 * time.Second
	sfCostIdle   = 10 * time.Second // the baseline before it
	sfCostGoal   = 5.0              // % of one core, per gateway
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
	// Paced by the clock, not by a ticker: a ticker drops the ticks its
	// reader missed (the load reached ~850/s here with one), the loop
	// below opens what is due since t0.
	for due := 0; time.Since(t0) < sfCostWindow; time.Sleep(time.Millisecond) {
		for want := int(time.Since(t0) * sfCostRate / time.Second); due < want; due++ {
			sfCostDial(&wg, client, dst, &opened, &failed)
		}
	}
	wg.Wait()
	el := time.Since(t0)
	after := read()
	sync := fmt.Sprintf("%.0f/s", float64(opened.Load())/el.Seconds())
	worst := 0.0
	var roles sfCostRoles
	for i, g := range gws {
		role := "backup"
		if g == owner {
			role = "owner"
		}
		e := 100 * (after[i].edgelb - before[i].edgelb).Seconds() / el.Seconds()
		k := 100 * (after[i].ctd - before[i].ctd).Seconds() / el.Seconds()
		idle := 100 * ((idle1[i].edgelb - idle0[i].edgelb) + (idle1[i].ctd - idle0[i].ctd)).Seconds() / iel.Seconds()
		worst = max(worst, e+k)
		if g == owner {
			roles.owner = e + k
		} else {
			roles.backup = max(roles.backup, e+k)
		}
		t.Logf("MEASURED statesync-cost gateways=%d method=%s family=%s sync=%s gateway=%s role=%s new_conns=%s window_s=%.1f failed=%d edgelb_pct_core=%.2f conntrackd_pct_core=%.2f total_pct_core=%.2f idle_total_pct_core=%.2f added_pct_core=%.2f (goal < %.0f%% on sync=on minus sync=off; load %s)",
			c.gateways, c.method, c.family(), onOff(c.sync), g.name, role, sync, el.Seconds(), failed.Load(), e, k, e+k, idle, e+k-idle, sfCostGoal, netns.Loadavg())
	}
	t.Logf("MEASURED statesync-cost gateways=%d method=%s family=%s sync=%s worst_total_pct_core=%.2f", c.gateways, c.method, c.family(), onOff(c.sync), worst)
	// A window without one owner, or whose load did not get through, is
	// no measurement (seen once at load ~35: no single owner of the VIP and
	// the source address, 19,999 of 20,000 connections failed, and a pair
	// "added" -2.75 %); it must not enter the medians as one.
	if owner == nil || failed.Load()*100 > opened.Load()+failed.Load() {
		t.Errorf("the cost window is no measurement: owner %v, %d of %d connections failed", owner != nil, failed.Load(), opened.Load()+failed.Load())
		return
	}
	sfCostPair(t, c, roles)
}

// sfCostDial opens one connection and closes it, in the background.
func sfCostDial(wg *sync.WaitGroup, client *netns.NS, dst string, opened, failed *atomic.Int64) {
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

// sfCostRoles: a case's totals, the owner's and the busiest backup's.
type sfCostRoles struct{ owner, backup float64 }

// sfCostPairs is EDGELB_STATESYNC_COST_RUNS (default 1): how often each
// selected case runs, on and off alternating. One run's figures depend on
// where the kernel placed the daemons' threads (on this VM a wake-up
// across CPUs costs several times one on the same CPU) and on when the web
// UI's flow snapshot lands in the window, so the bench takes the median of
// several pairs.
func sfCostPairs() int {
	n, err := strconv.Atoi(os.Getenv("EDGELB_STATESYNC_COST_RUNS"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// sfCostRuns keeps each case's totals until its pairs ran (the cases of
// one go test process run one after another).
var sfCostRuns = map[string]map[bool][]sfCostRoles{}

// sfCostPair records a case's totals; once its on and off runs pair up it
// prints what the sync added in that pair, and after the last pair the
// verdict on the medians (one pair: that pair).
func sfCostPair(t *testing.T, c sfCase, r sfCostRoles) {
	t.Helper()
	key := fmt.Sprintf("gateways=%d method=%s family=%s", c.gateways, c.method, c.family())
	if sfCostRuns[key] == nil {
		sfCostRuns[key] = map[bool][]sfCostRoles{}
	}
	sfCostRuns[key][c.sync] = append(sfCostRuns[key][c.sync], r)
	on, off := sfCostRuns[key][true], sfCostRuns[key][false]
	if len(on) != len(off) {
		return
	}
	n, want := len(on), sfCostPairs()
	if want > 1 {
		p, q := on[n-1], off[n-1]
		t.Logf("MEASURED statesync-cost-pair %s pair=%d/%d owner_on=%.2f owner_off=%.2f owner_added=%.2f backup_on=%.2f backup_off=%.2f backup_added=%.2f",
			key, n, want, p.owner, q.owner, p.owner-q.owner, p.backup, q.backup, p.backup-q.backup)
	}
	if n < want {
		return
	}
	pick := func(f func(i int) float64) float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return median(v)
	}
	ownerOn, ownerOff := pick(func(i int) float64 { return on[i].owner }), pick(func(i int) float64 { return off[i].owner })
	backupOn, backupOff := pick(func(i int) float64 { return on[i].backup }), pick(func(i int) float64 { return off[i].backup })
	owner := pick(func(i int) float64 { return on[i].owner - off[i].owner })
	backup := pick(func(i int) float64 { return on[i].backup - off[i].backup })
	// The verdict on the figure as printed: 9.45 − 4.45 is 4.9999… in
	// floating point, and "5.00 met" would read as a lie.
	worst := math.Round(max(owner, backup)*100) / 100
	verdict := "met"
	if worst >= sfCostGoal {
		verdict = "MISSED"
	}
	t.Logf("MEASURED statesync-cost-added %s owner_on=%.2f owner_off=%.2f owner_added=%.2f backup_on=%.2f backup_off=%.2f backup_added=%.2f worst_added_pct_core=%.2f goal=%.0f verdict=%s pairs=%d (medians)",
		key, ownerOn, ownerOff, owner, backupOn, backupOff, backup, worst, sfCostGoal, verdict, n)
}

// median of v (sorted in place); the mean of the middle two for an even count.
func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
