//go:build k8s

package k8s

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestK8sAPIServerDown: the apiserver goes away for a while. The gateway
// keeps its desired state (the dataplane keeps serving), the leader steps
// down when it cannot renew, and on return it leads again, re-reads every
// assignment and serves new Services without moving old ones. New Services
// are seen once client-go's informers re-watch: their reconnect backoff
// (0.8 s doubling to 30 s, jittered, not configurable through shared
// informers) dominates that delay after a long outage.
func TestK8sAPIServerDown(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "main", true, "192.0.2.0/27")
	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)
	const ns = "apps"
	before := map[string]string{}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("s%d", i)
		e.svc(t, ns, name)
		before[name] = e.waitAny(t, ns, name, 1, 30*time.Second)[0]
	}
	waitUntil(t, 30*time.Second, "10 VIPs desired", func() bool { return len(r.c.Desired().VIPs) == 10 })

	down := 5 * time.Second
	if err := e.lab.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	stepDown := waitUntil(t, 20*time.Second, "leader steps down", func() bool { return !r.c.IsLeader() })
	time.Sleep(down - time.Since(t0))
	if n := len(r.c.Desired().VIPs); n != 10 {
		t.Fatalf("desired state lost while the apiserver was down: %d VIPs", n)
	}
	up := time.Now()
	if err := e.lab.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	ready := time.Since(up)
	again := waitUntil(t, 60*time.Second, "leading again", r.c.IsLeader)
	e.svc(t, ns, "after")
	e.waitAny(t, ns, "after", 1, 90*time.Second)
	served := time.Since(up)
	for name, ip := range before {
		if got := e.ingress(ns, name); len(got) != 1 || got[0] != ip {
			t.Fatalf("%s moved from %s to %v", name, ip, got)
		}
	}
	list, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dups, _ := duplicates(list.Items)
	t.Logf("MEASURED apiserver down %s: leader stepped down after %s, desired state kept (10 VIPs); apiserver restarted (ready after %s), leading again %s after that, a new Service served %s after the restart began; 0 moved, %d duplicates",
		down, stepDown.Round(time.Millisecond), ready.Round(time.Millisecond), again.Round(time.Millisecond), served.Round(time.Millisecond), dups)
	if dups != 0 {
		t.Fatal("duplicates")
	}
}
