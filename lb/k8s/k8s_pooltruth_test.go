//go:build k8s

package k8s

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestK8sPoolTruth (issue 37) on the real API server:
//   - 300 of 301 Services deleted: IPPool status.used and
//     edgelb_k8s_pool_used become exactly 1 (they stayed 301), and SIZE
//     counts only usable addresses (avoidBuggyIPs);
//   - the stuck-pool sequence: the pool deleted in use, then its last
//     Service deleted → the pool is gone;
//   - the documented way to re-create a pool that is being deleted;
//   - a requested address after automatic ones, with lower addresses freed,
//     is met (automatic assignment takes the lowest free address).
//
// Durations are MEASURED (goal: 1 s); the assertions only bound them
// generously, so a busy machine cannot fail them, while a stale status (which
// never converges) still does.
func TestK8sPoolTruth(t *testing.T) {
	e := newEnv(t)
	const ns = "apps"
	const limit = 20 * time.Second
	gvr := e.dyn.Resource(IPPoolGVR)
	// 198.51.100.0/23 avoiding .0/.255: 512 addresses, 508 usable.
	e.poolAvoid(t, "big", "198.51.100.0/23")
	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)
	exact := func(pool string, size, used int64) func() bool {
		return func() bool {
			u, err := gvr.Get(e.ctx, pool, metav1.GetOptions{})
			if err != nil {
				return false
			}
			s, _, _ := unstructured.NestedInt64(u.Object, "status", "size")
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "used")
			return s == size && n == used &&
				testutil.ToFloat64(r.c.m.poolUsed.WithLabelValues(pool)) == float64(used) &&
				testutil.ToFloat64(r.c.m.poolSize.WithLabelValues(pool)) == float64(size)
		}
	}
	gone := func(pool string) func() bool {
		return func() bool {
			_, err := gvr.Get(e.ctx, pool, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}

	// 1. 301 Services, 300 deleted.
	const n = 301
	for i := range n {
		e.svc(t, ns, fmt.Sprintf("s%03d", i), ann(AnnotationPool, "big"))
	}
	took := waitUntil(t, 120*time.Second, "status.used 301, size 508", exact("big", 508, n))
	t.Logf("MEASURED pool-truth create services=%d status_used_exact_after_last_create_ms=%d", n, took.Milliseconds())
	for i := 1; i < n; i++ {
		e.deleteSvc(t, ns, fmt.Sprintf("s%03d", i))
	}
	took = waitUntil(t, limit, "status.used and edgelb_k8s_pool_used exactly 1", exact("big", 508, 1))
	t.Logf("MEASURED pool-truth delete services=%d status_used_exact_after_last_delete_ms=%d (goal 1000)", n-1, took.Milliseconds())

	// 2. The stuck-pool sequence.
	if err := gvr.Delete(e.ctx, "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, limit, "big deleting in use", func() bool {
		_, _, valid, msg := e.poolStatus(t, "big")
		return valid == "False" && len(msg) > 0 && containsAll(msg, "in use", "another name")
	})
	e.waitIngress(t, ns, "s000", limit, e.ingress(ns, "s000")...) // still served
	e.deleteSvc(t, ns, "s000")
	took = waitUntil(t, limit, "big gone after its last Service", gone("big"))
	t.Logf("MEASURED pool-truth stuck-pool gone_after_last_service_deleted_ms=%d (goal 1000)", took.Milliseconds())

	// 3. Re-creating a pool that is being deleted, the documented way.
	e.pool(t, "web", false, "192.0.2.64/27")
	for i := range 3 {
		e.svc(t, ns, fmt.Sprintf("w%d", i), ann(AnnotationPool, "web"))
	}
	held := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("w%d", i)
		held[name] = e.waitAny(t, ns, name, 1, limit)[0]
	}
	// In use: the status counts them and the in-use finalizer is on (it is
	// added with the status write that follows an assignment).
	waitUntil(t, limit, "web used 3", exact("web", 32, 3))
	if err := gvr.Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, limit, "web deleting, 3 in use", func() bool {
		u, err := gvr.Get(e.ctx, "web", metav1.GetOptions{})
		return err == nil && u.GetDeletionTimestamp() != nil && exact("web", 32, 3)()
	})
	if err := e.tryPool("web", false, "192.0.2.64/27"); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create of a deleting IPPool under its name: %v, want AlreadyExists", err)
	}
	e.pool(t, "web-new", false, "192.0.2.64/27")
	took = waitUntil(t, limit, "web gone once web-new covers its addresses", gone("web"))
	waitUntil(t, limit, "web-new counts the 3", exact("web-new", 32, 3))
	t.Logf("MEASURED pool-truth recreate deleting_pool_gone_after_covering_pool_created_ms=%d", took.Milliseconds())
	// The old name again. It overlaps web-new: the older of the two keeps
	// the range (creation times have 1 s granularity, then the name
	// decides), the other is Valid=False; either way no Service moves.
	e.pool(t, "web", false, "192.0.2.64/27")
	waitUntil(t, limit, "web's status written", func() bool { _, _, v, _ := e.poolStatus(t, "web"); return v != "" })
	if err := gvr.Delete(e.ctx, "web-new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, limit, "web-new gone, web valid with the 3", func() bool { return gone("web-new")() && exact("web", 32, 3)() })
	for name, ip := range held {
		if got := e.ingress(ns, name); len(got) != 1 || got[0] != ip {
			t.Errorf("%s held %s before the re-create, now %v: it must not move", name, ip, got)
		}
		if n := countEvents(e.events(ns, name), ReasonMoved); n != 0 {
			t.Errorf("%s: %d IPMoved events, want none", name, n)
		}
	}

	// 4. A requested address after automatic ones with lower ones freed.
	e.pool(t, "q", true, "192.0.2.0/28") // the only auto-assign pool now
	inQ := func(*corev1.Service) {}
	for i := range 8 {
		name := fmt.Sprintf("a%d", i)
		e.svc(t, ns, name, inQ)
		e.waitIngress(t, ns, name, limit, fmt.Sprintf("192.0.2.%d", i))
	}
	for i := range 4 {
		e.deleteSvc(t, ns, fmt.Sprintf("a%d", i))
	}
	waitUntil(t, limit, "q used 4", exact("q", 16, 4))
	for i := range 4 {
		name := fmt.Sprintf("b%d", i)
		e.svc(t, ns, name, inQ)
		e.waitIngress(t, ns, name, limit, fmt.Sprintf("192.0.2.%d", i)) // the lowest free, not .8 upwards
	}
	t0 := time.Now()
	e.svc(t, ns, "req", inQ, ann(AnnotationIPs, "192.0.2.8"))
	e.waitIngress(t, ns, "req", limit, "192.0.2.8")
	t.Logf("MEASURED pool-truth requested-after-automatic ip=192.0.2.8 met_after_ms=%d", time.Since(t0).Milliseconds())
	waitUntil(t, limit, "q used 9", exact("q", 16, 9))
	// The series of deleted pools (big, web-new) are gone: web and q remain.
	if a, b := testutil.CollectAndCount(r.c.m.poolUsed), testutil.CollectAndCount(r.c.m.poolSize); a != 2 || b != 2 {
		t.Errorf("pool metric series: used %d, size %d, want 2 each (web, q)", a, b)
	}
}

// poolAvoid creates an auto-assign IPPool with avoidBuggyIPs.
func (e *env) poolAvoid(t testing.TB, name string, addrs ...string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(IPPoolGVK)
	u.SetName(name)
	a := make([]any, len(addrs))
	for i, s := range addrs {
		a[i] = s
	}
	u.Object["spec"] = map[string]any{"addresses": a, "autoAssign": true, "avoidBuggyIPs": true}
	if _, err := e.dyn.Resource(IPPoolGVR).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func countEvents(evs []corev1.Event, reason string) int {
	k := 0
	for _, ev := range evs {
		if ev.Reason == reason {
			k++
		}
	}
	return k
}
