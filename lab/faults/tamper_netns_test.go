//go:build netns

package faults

import (
	"context"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsTamperRestored: edgelb's kernel objects are deleted or changed
// by hand with nft (an element of each map, a stray element added, a
// rule, a base chain, each whole table); the daemon's resync puts every
// one back: once the second resync counted after the tamper has finished
// (edgelb_dataplane_syncs_total), the kernel reads back whole, and traffic
// flows again.
//
// Why the second: resyncs run one after another in the effects loop and
// are counted when they return. The first one counted after the tamper
// may have read the kernel before it (it was running when nft ran); the
// second started after the first returned, so after the tamper, and must
// have repaired it. The assertion reads the counter first and the kernel
// after it, so it holds under any interleaving of the daemon, nft and this
// test — a loaded machine only makes it wait longer. (Reading the kernel
// whole and then the counter, as this test once did, races the counter's
// increment: under load the kernel was whole with the counter not yet
// moved, "repaired by resync 0".)
func TestNetnsTamperRestored(t *testing.T) {
	const resync = 2 * time.Second
	e := newEnv(t, "flt", 3)
	svcs := append([]svcDef{e.webService()}, e.bulkServices(20, 0)...)
	e.start(e.config(cfgOpts{Services: svcs, Resync: resync}))
	e.waitReady(time.Minute)
	e.converged("start", svcs)
	k, err := readKernel(e.lab.Gateway, "ip")
	if err != nil {
		t.Fatal(err)
	}
	baseRules := k.rules
	webKey := fmt.Sprintf("%s tcp %d", demo.VIP, 80)
	id := k.vip[webKey]
	beKey := fmt.Sprintf("0x%08x . 0x%08x", bits.ReverseBytes32(id), 0)
	mark := fmt.Sprintf("0x%08x", id)

	cases := []struct{ what, nft string }{
		{"a frontend element (vip map)", fmt.Sprintf("delete element ip edgelb vip { %s . tcp . 80 }", demo.VIP)},
		{"a bucket element (be map)", fmt.Sprintf("delete element ip edgelb be { %s }", beKey)},
		{"a dispatch element", fmt.Sprintf("delete element ip edgelb dispatch { %s }", mark)},
		{"a stray frontend added", fmt.Sprintf("add element ip edgelb vip { 192.0.2.120 . tcp . 81 : %s }", mark)},
		{"a bucket pointed elsewhere", fmt.Sprintf("delete element ip edgelb be { %s }\nadd element ip edgelb be { %s : 198.51.100.99 . 9 }", beKey, beKey)},
		{"the services chain's rules", "flush chain ip edgelb services"},
		{"the postrouting chain", "flush chain ip edgelb postrouting\ndelete chain ip edgelb postrouting"},
		{"the whole ip table", "delete table ip edgelb"},
		{"the whole ip6 table", "delete table ip6 edgelb"},
	}
	const resyncs = `edgelb_dataplane_syncs_total{kind="resync",result="ok"}`
	var worst time.Duration
	for _, c := range cases {
		cmd := e.lab.Gateway.Command(context.Background(), "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(c.nft + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tamper (%s): nft %q: %v: %s", c.what, c.nft, err, out)
		}
		// Counted after nft returned: resync r1+2 started after the tamper.
		r1 := e.metric(resyncs)
		var probs []string
		whole := func() bool {
			k, err := readKernel(e.lab.Gateway, "ip")
			if err != nil {
				probs = []string{err.Error()}
				return false
			}
			probs = k.diff(svcs, []netip.Addr{demo.GatewayFront.Addr()})
			if !slices.Equal(k.rules, baseRules) {
				probs = append(probs, fmt.Sprintf("rules %q, want %q", k.rules, baseRules))
			}
			if _, err := readKernel(e.lab.Gateway, "ip6"); err != nil {
				probs = append(probs, "ip6 table: "+err.Error())
			}
			return len(probs) == 0
		}
		// How long the repair took, as this test sees it (a figure, not an
		// assertion: a busy machine stretches it).
		took, ok := waitFor(2*resync+30*time.Second, 20*time.Millisecond, whole)
		if !ok {
			t.Fatalf("%s deleted by hand: not repaired after %s: %s", c.what, took.Round(time.Millisecond), summary(probs))
		}
		worst = max(worst, took)
		// The assertion: after two counted resyncs the kernel is whole.
		if _, ok := waitFor(2*resync+30*time.Second, 100*time.Millisecond, func() bool { return e.metric(resyncs) >= r1+2 }); !ok {
			t.Fatalf("%s: the resync counter did not move by 2 from %v within %s", c.what, r1, 2*resync+30*time.Second)
		}
		if !whole() {
			t.Errorf("%s: not whole after two resyncs that began after the tamper: %s", c.what, summary(probs))
		}
		e.trafficOK("after repairing "+c.what, svcs[0], svcs[1])
		t.Logf("MEASURED tamper — %s (`%s`): read back whole %s after the tamper (resync interval %s)", c.what, strings.ReplaceAll(c.nft, "\n", "; "), took.Round(time.Millisecond), resync)
	}
	e.alive()
	rs := e.metric(`edgelb_dataplane_sync_duration_seconds_sum{kind="resync"}`) / e.metric(`edgelb_dataplane_sync_duration_seconds_count{kind="resync"}`)
	t.Logf("MEASURED tamper repair: %d kinds, each whole after the second resync that followed it at the latest; worst %s from the tamper to the kernel read back whole, with resyncInterval %s (a resync's own read-and-repair: mean %.1f ms; this test polls every 20 ms); load %s",
		len(cases), worst.Round(time.Millisecond), resync, rs*1000, netns.Loadavg())
}
