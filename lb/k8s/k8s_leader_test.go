//go:build k8s

package k8s

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// duplicates counts addresses held by two live Services that may not share
// them (same non-empty sharing key required).
func duplicates(svcs []corev1.Service) (int, []string) {
	type holder struct{ name, key string }
	by := map[string][]holder{}
	for _, s := range svcs {
		for _, in := range s.Status.LoadBalancer.Ingress {
			by[in.IP] = append(by[in.IP], holder{s.Namespace + "/" + s.Name, s.Annotations[AnnotationShared]})
		}
	}
	n := 0
	var out []string
	for ip, hs := range by {
		for i := 1; i < len(hs); i++ {
			if hs[i].key == "" || hs[i].key != hs[0].key {
				n++
				out = append(out, fmt.Sprintf("%s: %s and %s", ip, hs[0].name, hs[i].name))
			}
		}
	}
	return n, out
}

// TestK8sTwoInstances: two controllers on one apiserver. One writer at a
// time, no double assignment; the second takes over when the first is
// killed (Lease not released: takeover waits for it to expire) and, later,
// when the leader is stopped cleanly (Lease released: takeover at once).
func TestK8sTwoInstances(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "main", true, "192.0.2.0/26")
	const ns = "apps"
	oa := testOptions("gw-a")
	oa.KeepLeaseOnStop = true // its stop plays a kill -9: the Lease stays held
	a := e.start(t, oa)
	waitUntil(t, 15*time.Second, "gw-a leading", a.c.IsLeader)
	b := e.start(t, testOptions("gw-b"))
	if err := b.c.WaitSynced(e.ctx); err != nil {
		t.Fatal(err)
	}

	// Watch both for overlapping leadership the whole time.
	var (
		mu       sync.Mutex
		insts    = []*running{a, b}
		overlaps atomic.Int64
		stopMon  = make(chan struct{})
		monDone  = make(chan struct{})
	)
	go func() {
		defer close(monDone)
		for {
			select {
			case <-stopMon:
				return
			case <-time.After(2 * time.Millisecond):
			}
			// Two passes: an instance counts when it led at both of its
			// reads. Each leads for one interval at most here, so it led
			// throughout between them, and two that did overlapped for real.
			// One pass would read the instances at different moments: on
			// a busy machine the old leader's "yes" can be older than the
			// new one's, read after a release and takeover in between.
			mu.Lock()
			first := make([]bool, len(insts))
			for i, r := range insts {
				first[i] = r.c.IsLeader()
			}
			n := 0
			for i, r := range insts {
				if first[i] && r.c.IsLeader() {
					n++
				}
			}
			mu.Unlock()
			if n > 1 {
				overlaps.Add(1)
			}
		}
	}()

	for i := 0; i < 20; i++ {
		e.svc(t, ns, fmt.Sprintf("s%02d", i))
	}
	for i := 0; i < 20; i++ {
		e.waitAny(t, ns, fmt.Sprintf("s%02d", i), 1, 30*time.Second)
	}
	assignedA := testutil.ToFloat64(a.c.m.allocations.WithLabelValues("assigned"))
	assignedB := testutil.ToFloat64(b.c.m.allocations.WithLabelValues("assigned"))
	t.Logf("while gw-a leads: assignments by gw-a %v, by gw-b %v", assignedA, assignedB)
	if assignedA != 20 || assignedB != 0 {
		t.Fatalf("writers: gw-a %v gw-b %v, want 20 and 0", assignedA, assignedB)
	}
	// Every gateway programs itself: the follower's desired state has them all.
	waitUntil(t, 30*time.Second, "20 VIPs in the follower's desired state", func() bool { return len(b.c.Desired().VIPs) == 20 })

	// Kill the leader: the Lease stays until it expires.
	t0 := time.Now()
	a.stop()
	e.svc(t, ns, "after-kill")
	takeover := waitUntil(t, 30*time.Second, "gw-b leading", b.c.IsLeader)
	e.waitAny(t, ns, "after-kill", 1, 30*time.Second)
	served := time.Since(t0)
	t.Logf("MEASURED takeover after the leader was killed: %s (lease %s); new Service served %s after the kill",
		takeover.Round(time.Millisecond), oa.LeaseDuration, served.Round(time.Millisecond))

	// Bring a back (clean-stop mode) as a follower, then stop b cleanly.
	ob := testOptions("gw-a2")
	a2 := e.start(t, ob)
	mu.Lock()
	insts = append(insts, a2)
	mu.Unlock()
	if err := a2.c.WaitSynced(e.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if a2.c.IsLeader() {
		t.Fatal("a restarted instance took the Lease from a live leader")
	}
	t1 := time.Now()
	b.stop()
	takeover2 := waitUntil(t, 30*time.Second, "gw-a2 leading", a2.c.IsLeader)
	_ = t1
	e.svc(t, ns, "after-release")
	e.waitAny(t, ns, "after-release", 1, 30*time.Second)
	t.Logf("MEASURED takeover after the leader stopped cleanly (Lease released): %s", takeover2.Round(time.Millisecond))
	close(stopMon)
	<-monDone

	list, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dups, which := duplicates(list.Items)
	assigned := 0
	for _, s := range list.Items {
		assigned += len(s.Status.LoadBalancer.Ingress)
	}
	t.Logf("MEASURED two instances: %d Services assigned, duplicate IPs %d, samples with two leaders %d", assigned, dups, overlaps.Load())
	if dups != 0 || overlaps.Load() != 0 || assigned != 22 {
		t.Fatalf("duplicates %d %v, overlapping leaders %d, assigned %d", dups, which, overlaps.Load(), assigned)
	}
}
