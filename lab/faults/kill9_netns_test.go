//go:build netns

package faults

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
)

// foreignRules adds a table with a rule (and a second table) that belong to
// someone else, and returns a function that fails the test when any of it
// changed: edgelb must never touch what it did not create.
func foreignRules(t *testing.T, ns *netns.NS) func(step string) {
	t.Helper()
	const ruleset = `table inet other {
	chain input {
		type filter hook input priority 0; policy accept;
		tcp dport 9 counter accept comment "someone-elses"
	}
}
table ip nat {
	chain postrouting {
		type nat hook postrouting priority 100; policy accept;
		oifname "nothere0" masquerade comment "someone-elses-too"
	}
}
`
	cmd := ns.Command(context.Background(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f (foreign tables): %v: %s", err, out)
	}
	snap := func() string {
		var b strings.Builder
		for _, tbl := range [][2]string{{"inet", "other"}, {"ip", "nat"}} {
			out, err := ns.Exec(context.Background(), "nft", "-a", "list", "table", tbl[0], tbl[1])
			if err != nil {
				return "missing: " + err.Error()
			}
			b.Write(out)
		}
		return b.String()
	}
	before := snap()
	return func(step string) {
		t.Helper()
		if after := snap(); after != before {
			t.Errorf("%s: someone else's tables changed:\nbefore:\n%s\nafter:\n%s", step, before, after)
		} else {
			t.Logf("%s: the foreign tables inet other and ip nat (2 rules) are untouched", step)
		}
	}
}

// TestNetnsKill9During10kSync: the daemon is killed with SIGKILL while its
// first sync of 10,000 services is half written; restarted, it converges
// the kernel to exactly the config (nothing missing, nothing stale). Killed
// again and restarted with a changed config (1,000 fewer services, 500 new,
// every seventh changed), it converges to that one with no leftover of the first.
// Someone else's tables stay untouched throughout.
func TestNetnsKill9During10kSync(t *testing.T) {
	n := envInt("EDGELB_FAULT_SERVICES", 10000)
	e := newEnv(t, "flk", 3)
	check := foreignRules(t, e.lab.Gateway)
	a := append([]svcDef{e.webService()}, e.bulkServices(n-1, 0)...)
	b := append([]svcDef{e.webService()}, e.bulkServices(n-1, 1)...)
	cfgA := e.config(cfgOpts{Services: a})
	t.Logf("config A: %d services (%d KiB of YAML); config B: %d services; load %s", len(a), len(cfgA)/1024, len(b), netns.Loadavg())

	// 1. Kill -9 in the middle of the first sync. Between two of the
	// dataplane's netlink batches some frontends are in and some are not;
	// when a run is too quick to catch, the table is removed and the daemon
	// started again (at most 5 times).
	var at int
	partial := false
	attempts := 5
	if n < 5000 {
		attempts = 1 // one netlink batch: there is no half-way to catch
	}
	for attempt := 1; attempt <= attempts && !partial; attempt++ {
		e.start(cfgA)
		t0 := time.Now()
		for {
			// Kill as soon as the first batch is in (the frontend set exists):
			// waiting for a frontend element let a quick sync finish first.
			c := vipCount(e.lab.Gateway)
			if c >= 0 {
				e.kill9()
				at, partial = c, c < len(a)
				t.Logf("attempt %d: kill -9 %s after start, %d of %d frontends in the kernel", attempt, time.Since(t0).Round(time.Millisecond), at, len(a))
				break
			}
			select {
			case <-e.d.Done():
				t.Fatalf("daemon exited by itself: %v\n%s", e.d.Err(), e.logs.Tail(30))
			default:
			}
			if time.Since(t0) > 5*time.Minute {
				t.Fatal("no frontend programmed 5 minutes after start")
			}
			time.Sleep(2 * time.Millisecond)
		}
		if !partial {
			if _, err := e.lab.Gateway.Exec(context.Background(), "nft", "delete", "table", "ip", "edgelb"); err != nil {
				t.Fatal(err)
			}
		}
	}
	switch {
	case !partial && n >= 5000:
		t.Fatalf("never caught the sync half-way in 5 attempts")
	case !partial:
		// A small EDGELB_FAULT_SERVICES fits one netlink batch: the kill
		// lands after the sync; the restart checks still run.
		t.Logf("%d services fit one batch: killed after the sync, not during it", n)
	}
	if k, err := readKernel(e.lab.Gateway, "ip"); err == nil {
		t.Logf("left by the killed daemon: %d elements, %d differences from config A (e.g. %s)",
			k.elements, len(k.diff(a, []netip.Addr{demo.GatewayFront.Addr()})), firstOf(k.diff(a, []netip.Addr{demo.GatewayFront.Addr()})))
	}
	check("after kill -9 mid-sync")

	// 2. Restart with the same config: converges to exactly A.
	e.start(cfgA)
	ready := e.waitReady(5 * time.Minute)
	cpu := procCPU(e.d.PID())
	e.converged("restart with config A", a)
	rss, _ := procStatus(e.d.PID(), "VmRSS", "VmHWM")
	t.Logf("MEASURED restart after kill -9 at %d/%d frontends: ready (kernel converged) in %s, daemon CPU %s; RSS %.1f MiB (peak %.1f MiB) with %d services; load %s",
		at, len(a), ready.Round(time.Millisecond), cpu, float64(rss["VmRSS"])/1024, float64(rss["VmHWM"])/1024, len(a), netns.Loadavg())
	e.trafficOK("config A", a[0], a[1], a[len(a)-1])
	check("after the restart")

	// 3. Kill -9 a converged daemon and start it with a changed config:
	// what A had and B does not must go.
	e.kill9()
	e.start(e.config(cfgOpts{Services: b}))
	ready = e.waitReady(5 * time.Minute)
	cpu = procCPU(e.d.PID())
	e.converged("restart with config B", b)
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, s := range a {
		inA[s.Name] = true
	}
	removed, added := 0, 0
	for _, s := range b {
		inB[s.Name] = true
		if !inA[s.Name] {
			added++
		}
	}
	for name := range inA {
		if !inB[name] {
			removed++
		}
	}
	t.Logf("MEASURED restart with config B (%d services: %d removed, %d added, every 7th changed): ready in %s, daemon CPU %s; load %s",
		len(b), removed, added, ready.Round(time.Millisecond), cpu, netns.Loadavg())
	e.trafficOK("config B", b[0], b[1], b[len(b)-1])
	check("after the restart with config B")
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return s[0]
}
