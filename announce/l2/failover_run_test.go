//go:build failover

package l2

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Trials per topology (the issue asks for 20).
const failoverTrials = 20

func TestFailoverTwoGateways(t *testing.T)   { runFailover(t, 2) }
func TestFailoverThreeGateways(t *testing.T) { runFailover(t, 3) }

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// percentile by nearest rank (p99 of 20 samples is the maximum).
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func summary(name string, xs []time.Duration) string {
	if len(xs) == 0 {
		return name + ": no samples"
	}
	return fmt.Sprintf("%s: n=%d p50=%s p99=%s min=%s max=%s", name, len(xs),
		ms(percentile(xs, 50)), ms(percentile(xs, 99)), ms(slices.Min(xs)), ms(slices.Max(xs)))
}

func runFailover(t *testing.T, n int) {
	l := newFLab(t, n)
	names := l.names()
	t.Logf("%d gateways %v on a bridge; VIPs %v; load average %s", n, names, l.vips, netns.Loadavg())
	defer func() { t.Logf("load average at the end: %s", netns.Loadavg()) }()
	for _, g := range l.gws {
		t.Logf("  %s %s mac %s", g.name, g.ip, g.mac)
	}
	tStart := mono()
	for _, g := range l.gws {
		l.start(g)
	}
	if _, err := l.waitOwners(names, 20*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("all gateways up, every VIP owned once: %s after start", ms(mono()-tStart))
	}
	prob := newProber(t, l.cl, "cl0", l.vips, 20*time.Millisecond)
	neigh := watchNeigh(t, l.cl)

	var recover4, recover6, neigh4, neigh6, rebalance []time.Duration
	var returnProbes, returnSplit int
	var logOverlaps []overlap
	for trial := 0; trial < failoverTrials; trial++ {
		victim := l.gw(names[trial%n])
		// The victim's VIPs, one per family (pickVIPs gave each gateway one).
		var v4, v6 netip.Addr
		for _, v := range l.vips {
			if ownerOf(v, names) == victim.name {
				if v.Is4() {
					v4 = v
				} else {
					v6 = v
				}
			}
		}
		newOwner := map[netip.Addr]*gateway{}
		var survivors []string
		for _, s := range names {
			if s != victim.name {
				survivors = append(survivors, s)
			}
		}
		for _, v := range []netip.Addr{v4, v6} {
			newOwner[v] = l.gw(ownerOf(v, survivors))
		}
		// Traffic on both VIPs; the client's neighbour entries point at the victim.
		ld4 := startLoad(l.cl, v4, 10*time.Millisecond, 300*time.Millisecond)
		ld6 := startLoad(l.cl, v6, 10*time.Millisecond, 300*time.Millisecond)
		warm := mono()
		deadline := time.Now().Add(time.Minute) // a hang bound
		for {
			_, ok4 := ld4.firstSuccess(victim.name, warm)
			_, ok6 := ld6.firstSuccess(victim.name, warm)
			if ok4 && ok6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: no traffic through %s before the kill", trial, victim.name)
			}
			time.Sleep(10 * time.Millisecond)
		}

		t0 := l.kill(victim)
		var got4, got6, n4, n6 time.Duration
		// A hang bound: the recovery times are the MEASURED figures (goal
		// p99 < 500 ms), which a busy machine stretches.
		deadline = time.Now().Add(time.Minute)
		for got4 == 0 || got6 == 0 || n4 == 0 || n6 == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: kill of %s not recovered in a minute (v4 ok=%v v6 ok=%v neigh4=%v neigh6=%v); owners %v",
					trial, victim.name, got4 > 0, got6 > 0, n4 > 0, n6 > 0, l.owners())
			}
			time.Sleep(5 * time.Millisecond)
			if at, ok := ld4.firstSuccess(newOwner[v4].name, t0); ok && got4 == 0 {
				got4 = at - t0
			}
			if at, ok := ld6.firstSuccess(newOwner[v6].name, t0); ok && got6 == 0 {
				got6 = at - t0
			}
			if at, ok := neigh.firstMAC(v4, newOwner[v4].mac.String(), t0); ok && n4 == 0 {
				n4 = at - t0
			}
			if at, ok := neigh.firstMAC(v6, newOwner[v6].mac.String(), t0); ok && n6 == 0 {
				n6 = at - t0
			}
		}
		ld4.close()
		ld6.close()
		ok4, fail4 := ld4.counts(t0)
		recover4, recover6, neigh4, neigh6 = append(recover4, got4), append(recover6, got6), append(neigh4, n4), append(neigh6, n6)

		// The victim returns; capture on the wire during the whole return.
		tBack := mono()
		l.start(victim)
		d, err := l.waitOwners(names, time.Minute)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		// Let the last GARPs and any straggling answer arrive, then judge the window.
		time.Sleep(300 * time.Millisecond)
		w := prob.stats(tBack, mono())
		returnProbes += w.probes
		returnSplit += w.split
		logOverlaps = append(logOverlaps, l.overlaps(tBack, mono())...)
		rebalance = append(rebalance, d)
		t.Logf("trial %2d: kill -9 %s: requests to %s ok again after %s (via %s, %d ok/%d failed meanwhile), client neighbour entry %s after %s; %s after %s, entry after %s | return: rebalanced in %s, %d probes during return, %d answered by two MACs",
			trial+1, victim.name, v4, ms(got4), newOwner[v4].name, ok4, fail4, newOwner[v4].mac, ms(n4), v6, ms(got6), ms(n6), ms(d), w.probes, w.split)
		if w.split > 0 {
			// Judged with the whole run's below: a return's split is an
			// error unless a false death explains it.
			t.Logf("trial %d: split brain on the wire during the return: %v", trial+1, w.splitExamples)
		}
	}

	t.Logf("=== %d gateways, %d kill -9 trials (goal p99 < 500 ms; kube-vip ≈ 3 s, MetalLB \"a few seconds\", keepalived ≈ 3 s)", n, failoverTrials)
	t.Logf("MEASURED %d gateways: %s", n, summary("IPv4 requests succeed again  ", recover4))
	t.Logf("MEASURED %d gateways: %s", n, summary("IPv4 client entry has new MAC", neigh4))
	t.Logf("MEASURED %d gateways: %s", n, summary("IPv6 requests succeed again  ", recover6))
	t.Logf("MEASURED %d gateways: %s", n, summary("IPv6 client entry has new MAC", neigh6))
	t.Logf("MEASURED %d gateways: %s", n, summary("old owner back → rebalanced  ", rebalance))
	t.Logf("MEASURED %d gateways: returns: %d wire probes during the returns, %d answered by two MACs; gateway logs: %d overlapping claims", n, returnProbes, returnSplit, len(logOverlaps))
	fd := l.falseDeaths()
	t.Logf("memberlist: %d suspicions refuted by live gateways (stale probes of a restarted gateway's previous incarnation, mostly), %d live gateways declared dead %v",
		l.count("Refuting a suspect message"), len(fd), fd)
	// The whole run, kills included. A false death — a live gateway starved
	// past the stall tolerance ((1 + SuspicionMult) × ProbeInterval ≈ 240 ms
	// by default) and declared dead — makes a survivor claim its VIPs while
	// it still answers: a real split brain, the price of sub-second
	// detection, which the refutation ends (the converged capture below
	// asserts one MAC per VIP). On a machine whose cores are busy that is
	// scheduling, not chance-free: so an overlap is an error unless the
	// claimer had declared a holder dead while it ran, and a split on the
	// wire is an error unless its VIP has such an explained overlap. The
	// explained ones are MEASURED.
	whole := prob.stats(0, mono())
	allOverlaps := l.overlaps(0, mono())
	t.Logf("whole run: %d wire probes, %d answered by two MACs; %d overlapping claims in the gateways' logs", whole.probes, whole.split, len(allOverlaps))
	explained := map[netip.Addr]bool{}
	nExplained := 0
	for _, o := range allOverlaps {
		if o.explainedBy(fd) {
			explained[o.vip] = true
			nExplained++
			continue
		}
		t.Errorf("overlap in gateway logs with no false death to explain it: %s", o)
	}
	splitExplained := 0
	for vip, n := range whole.splitVIPs {
		if explained[vip] {
			splitExplained += n
			continue
		}
		t.Errorf("split brain on the wire for %s (%d probes) with no false death to explain it: %v", vip, n, whole.splitExamples)
	}
	t.Logf("MEASURED %d gateways: false deaths (live gateways starved past the stall tolerance): %d; overlapping claims they explain: %d; probes answered by two MACs they explain: %d (load %s)",
		n, len(fd), nExplained, splitExplained, netns.Loadavg())

	// Converged: 5 s of ARP/NDP probing, exactly one MAC per VIP, no announcements.
	if _, err := l.waitOwners(names, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	c0 := mono()
	time.Sleep(5 * time.Second)
	c1 := mono()
	// Answers to the last probes may still be on their way (a busy
	// machine's responder and capture lag): wait for them, up to 10 s.
	w := prob.stats(c0, c1)
	for end := time.Now().Add(10 * time.Second); w.answered < w.probes && time.Now().Before(end); w = prob.stats(c0, c1) {
		time.Sleep(100 * time.Millisecond)
	}
	ann := prob.announcements(c0, c1)
	t.Logf("=== converged, 5 s capture: %d probes, %d answered, %d answered by two MACs, %d gratuitous ARP/unsolicited NA", w.probes, w.answered, w.split, len(ann))
	macName := map[string]string{}
	for _, g := range l.gws {
		macName[g.mac.String()] = g.name
	}
	vips := slices.Clone(l.vips)
	sort.Slice(vips, func(i, j int) bool { return vips[i].Less(vips[j]) })
	for _, v := range vips {
		var who []string
		for m, c := range w.macs[v] {
			who = append(who, fmt.Sprintf("%s (%s) %d answers", m, macName[m], c))
		}
		sort.Strings(who)
		want := l.gw(ownerOf(v, names)).mac.String()
		t.Logf("  %-15s answered by %d MAC: %s", v, len(who), strings.Join(who, ", "))
		if len(w.macs[v]) != 1 || w.macs[v][want] == 0 {
			t.Errorf("%s: want exactly %s answering", v, want)
		}
	}
	if w.split != 0 || len(ann) != 0 || w.answered != w.probes {
		t.Errorf("converged capture: split=%d announcements=%d unanswered=%d", w.split, len(ann), w.probes-w.answered)
	}
}
