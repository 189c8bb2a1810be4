//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/proxy/fake"
)

// TestK8sPoolChangesNoDuplicates (issue 13): 200 Services on the real API
// server through the IPPool sequence that once wrote one IP to four
// Services — pool "default" in use deleted while an overlapping pool waits
// — then a shrink, an overlap-replace and a re-create. Throughout (polled
// every 100 ms, not only at the end of a step), Service status never shows
// an address on two Services that may not share it, and the leader's
// desired state always applies to a dataplane that refuses duplicate
// frontends the way nftables does.
func TestK8sPoolChangesNoDuplicates(t *testing.T) {
	e := newEnv(t)
	const ns = "apps"
	n := 200
	e.pool(t, "default", true, "192.0.2.0/24")
	r := e.start(t, testOptions("gw-a"))
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)
	for i := 0; i < n; i++ {
		e.svc(t, ns, fmt.Sprintf("s%03d", i))
	}
	// more creates Services right after a pool change: they allocate from
	// the pools as they now are — where a held address the new pool did
	// not count would be handed out a second time.
	more := func(k int) {
		for i := 0; i < k; i++ {
			e.svc(t, ns, fmt.Sprintf("s%03d", n))
			n++
		}
	}
	dp := fake.New(fake.NFTablesOptions)
	type tally struct{ samples, dups, applyOK, applyFail int }
	var cur tally
	sample := func() (withIP int, addrs map[string]string, dups int) {
		list, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addrs = map[string]string{}
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				withIP++
				addrs[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
			}
		}
		dups, ex := duplicates(list.Items)
		if dups > 0 {
			t.Errorf("duplicate addresses in Service status: %v", ex[:min(3, len(ex))])
		}
		if err := dp.Apply(context.Background(), r.c.Desired().Dataplane); err != nil {
			cur.applyFail++
			t.Errorf("the dataplane refused the leader's desired state: %v", err)
		} else {
			cur.applyOK++
		}
		cur.samples++
		cur.dups += dups
		return withIP, addrs, dups
	}
	// settle polls until every Service has an address inside want and
	// nothing changed for a second.
	settle := func(step string, inside func(netip.Addr) bool) map[string]string {
		var last map[string]string
		stableSince := time.Now()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			withIP, addrs, _ := sample()
			ok := withIP == n
			for _, ip := range addrs {
				a, _ := netip.ParseAddr(ip)
				ok = ok && inside(a)
			}
			if fmt.Sprint(addrs) != fmt.Sprint(last) || !ok {
				stableSince, last = time.Now(), addrs
			} else if time.Since(stableSince) > time.Second {
				return addrs
			}
			time.Sleep(100 * time.Millisecond)
		}
		withIP, _, _ := sample()
		t.Fatalf("%s: did not settle: %d of %d Services with an address inside the pools", step, withIP, n)
		return nil
	}
	in := func(prefixes ...string) func(netip.Addr) bool {
		return func(a netip.Addr) bool {
			for _, p := range prefixes {
				if netip.MustParsePrefix(p).Contains(a) {
					return true
				}
			}
			return false
		}
	}
	moved := func(a, b map[string]string) int {
		m := 0
		for k, v := range a {
			if b[k] != v {
				m++
			}
		}
		return m
	}
	report := func(step string, before, after map[string]string) {
		t.Logf("MEASURED pool step %-58s services with IP %d/%d (%d of them new since the step before), pending %d, moved %3d, duplicates seen %d (%d samples), desired state applied ok %d, refused %d",
			step, len(after), n, len(after)-len(before), n-len(after), moved(before, after), cur.dups, cur.samples, cur.applyOK, cur.applyFail)
		cur = tally{}
	}
	del := func(name string) {
		if err := e.dyn.Resource(IPPoolGVR).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	a0 := settle("start", in("192.0.2.0/24"))
	report("200 Services on pool default", nil, a0)

	// The overlapping pool waits (refused while default exists) ...
	e.pool(t, "wide", true, "192.0.2.0/24", "198.51.100.0/26")
	waitUntil(t, 30*time.Second, "wide refused", func() bool { _, _, v, _ := e.poolStatus(t, "wide"); return v == "False" })
	// ... and becomes valid when default, in use, is deleted.
	del("default")
	more(10)
	a1 := settle("default deleted", in("192.0.2.0/24", "198.51.100.0/26"))
	report("default (in use) deleted; overlapping wide valid", a0, a1)
	if moved(a0, a1) != 0 {
		t.Errorf("%d Services moved although wide covers their addresses", moved(a0, a1))
	}

	// Shrink: .0-.127 leave the pool; those Services move, one at a time,
	// each keeping its address until it has a new one.
	u, err := e.dyn.Resource(IPPoolGVR).Get(e.ctx, "wide", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["addresses"] = []any{"192.0.2.128/25", "198.51.100.0/24"}
	if _, err := e.dyn.Resource(IPPoolGVR).Update(e.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	more(10)
	a2 := settle("shrink", in("192.0.2.128/25", "198.51.100.0/24"))
	report("wide shrunk to 192.0.2.128/25 + 198.51.100.0/24", a1, a2)

	// Overlap-replace: next waits, wide goes, next takes over in place.
	e.pool(t, "next", true, "192.0.2.0/24", "198.51.100.0/24")
	waitUntil(t, 30*time.Second, "next refused", func() bool { _, _, v, _ := e.poolStatus(t, "next"); return v == "False" })
	del("wide")
	more(10)
	a3 := settle("overlap-replace", in("192.0.2.0/24", "198.51.100.0/24"))
	report("wide replaced by the overlapping next", a2, a3)
	if moved(a2, a3) != 0 {
		t.Errorf("%d Services moved although next covers their addresses", moved(a2, a3))
	}

	// Re-create: next deleted (every address left without a pool, kept
	// reserved), default re-created over the same addresses.
	// next, in use by every Service and covered by no other pool, stays
	// (the finalizer) and says so; its addresses stay reserved.
	del("next")
	waitUntil(t, 15*time.Second, "next reported as deleting in use", func() bool {
		_, _, v, msg := e.poolStatus(t, "next")
		return v == "False" && strings.Contains(msg, "kept reserved")
	})
	_, used, _, msg := e.poolStatus(t, "next")
	withIP, _, _ := sample()
	t.Logf("MEASURED deleted IPPool in use: status used %d, %q; Services with an address %d/%d", used, msg[:min(len(msg), 160)], withIP, n)
	if used != int64(n) || withIP != n {
		t.Errorf("deleted next: used %d, %d Services with an address, want %d and %d", used, withIP, n, n)
	}
	// Still served while deleting: the Services own these addresses until they move.
	waitUntil(t, 30*time.Second, "the deleting pool's VIPs still in the desired state", func() bool { return len(r.c.Desired().VIPs) == n })
	e.pool(t, "default", true, "192.0.2.0/24", "198.51.100.0/24")
	more(10)
	a4 := settle("re-create", in("192.0.2.0/24", "198.51.100.0/24"))
	report("next deleted, default re-created", a3, a4)
	// Covered by default now: next's addresses are default's, so it goes.
	waitUntil(t, 15*time.Second, "the deleted next gone", func() bool {
		_, err := e.dyn.Resource(IPPoolGVR).Get(e.ctx, "next", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if moved(a3, a4) != 0 {
		t.Errorf("%d Services moved although the re-created default covers their addresses", moved(a3, a4))
	}
	_ = corev1.ServiceTypeLoadBalancer
}
