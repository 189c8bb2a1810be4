//go:build netns

package faults

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
)

// TestNetnsUpgradeUnderLoad: a gateway programmed by an earlier edgelb
// (EDGELB_OLD_BIN, e.g. built from an older commit) is taken over by this
// one — kill -9 of the old daemon, start of the new on the same kernel
// state — while HTTP load runs through a masqueraded VIP. The new daemon
// rewrites what its layout does differently (service ids, postrouting);
// meanwhile every request must be answered and masqueraded (the lab's
// backends route through the gateway, so a connection that missed its
// masquerade would still work: the backends' view of the source is what
// tells). Skipped without EDGELB_OLD_BIN.
func TestNetnsUpgradeUnderLoad(t *testing.T) {
	old := os.Getenv("EDGELB_OLD_BIN")
	if old == "" {
		t.Skip("EDGELB_OLD_BIN (an earlier edgelb binary) not set")
	}
	e := newEnv(t, "flu", 3)
	web := e.webService()
	keep := web
	keep.Name, keep.VIP, keep.Method, keep.NodePort = "web-nosnat", netip.MustParseAddr("192.0.2.101"), "nat-nosnat", 0
	svcs := append([]svcDef{web, keep}, e.bulkServices(envInt("EDGELB_FAULT_SERVICES", 10000)-2, 0)...)
	cfg := e.config(cfgOpts{Services: svcs})

	cur := e.exe
	e.exe = old
	e.start(cfg)
	e.waitReady(2 * time.Minute)
	if _, ok := waitFor(time.Minute, 50*time.Millisecond, func() bool { return vipCount(e.lab.Gateway) == len(svcs) }); !ok {
		t.Fatal("the old daemon never programmed every service")
	}
	e.trafficOK("old daemon", web, keep)

	// Load on the lab's VIP and on the last bulk service, whose elements
	// come in the new daemon's last batch: the longest in the old layout.
	last := svcs[len(svcs)-1]
	before := map[string]map[string]int{}
	for _, b := range e.lab.Backends {
		before[b.Name] = b.Peers()
	}
	ctx, stop := context.WithCancel(context.Background())
	res, wait := e.runLoad(ctx, fmt.Sprintf("http://%s/", netip.AddrPortFrom(web.VIP, web.Port)), 2, 2*time.Millisecond)
	res2, wait2 := e.runLoad(ctx, fmt.Sprintf("http://%s/", netip.AddrPortFrom(last.VIP, last.Port)), 2, 2*time.Millisecond)
	time.Sleep(time.Second)
	e.kill9()
	e.exe = cur
	t0 := time.Now()
	e.start(cfg)
	e.waitReady(2 * time.Minute)
	ready := time.Since(t0)
	e.converged("after the upgrade", svcs)
	time.Sleep(time.Second)
	stop()
	wait()
	wait2()

	client := demo.ClientAddr.Addr().String()
	unmasked := 0
	for _, b := range e.lab.Backends {
		unmasked += b.Peers()[client] - before[b.Name][client]
	}
	var total int
	var errs []string
	for _, r := range []*loadResult{res, res2} {
		r.mu.Lock()
		total += r.total
		errs = append(errs, r.errs...)
		r.mu.Unlock()
	}
	failed := len(errs)
	t.Logf("MEASURED upgrade under load (%d services; old daemon killed, new one ready %s after its start): %d requests through two masqueraded VIPs (%s, %s), %d failed, %d reached a backend unmasqueraded",
		len(svcs), ready.Round(time.Millisecond), total, web.Name, last.Name, failed, unmasked)
	if failed > 0 {
		t.Errorf("%d of %d requests failed during the upgrade: %v", failed, total, errs[:min(len(errs), 5)])
	}
	if unmasked > 0 {
		t.Errorf("%d requests reached a backend from the client's own address: masquerade was skipped during the upgrade", unmasked)
	}
	e.trafficOK("new daemon", web, keep)
}
