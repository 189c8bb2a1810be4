package k8s

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestStepDownKeepsDecisionsTheCacheHasNotSeen: the leader assigns a VIP
// and its status write is acknowledged, but the informer never sees it (as
// when the API server goes away right after the write); then the leader
// cannot renew its Lease and steps down. The VIP stays in this gateway's
// Desired — withdrawing it for the length of an API outage is what
// TestK8sAPIServerDown caught in a soak run — until the cached Service
// moves to a newer version, from which on it is served from its status as
// on any follower (here: none yet, so the VIP goes).
func TestStepDownKeepsDecisionsTheCacheHasNotSeen(t *testing.T) {
	// client-go's fake keeps no resourceVersions: give Services some, as
	// an API server does on every write.
	var version atomic.Int64
	stamp := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if m, err := meta.Accessor(o.GetObject()); err == nil {
				m.SetResourceVersion(strconv.FormatInt(version.Add(1), 10))
			}
		}
		return false, nil, nil // and on to the store
	}
	// Status writes are acknowledged and dropped: the cache never gets them.
	var statusWrites atomic.Int32
	// apiGone: the API refuses Lease renewals (set later in the test).
	var apiGone atomic.Bool
	c, cs, _, ctx := leadingFakeWith(t, prometheus.NewRegistry(), func(cs *fake.Clientset) {
		cs.PrependReactor("create", "services", stamp)
		cs.PrependReactor("update", "services", stamp)
		cs.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" {
				return false, nil, nil
			}
			statusWrites.Add(1)
			return true, a.(k8stesting.UpdateAction).GetObject(), nil
		})
		cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if !apiGone.Load() {
				return false, nil, nil
			}
			return true, nil, errors.New("the API server is gone")
		})
	}, poolObj("p", 0, "192.0.2.0/28"))
	if _, err := cs.CoreV1().Services("default").Create(ctx, lbService("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a's VIP in the leader's Desired and its status written",
		func() bool { return len(c.Desired().VIPs) == 1 && statusWrites.Load() > 0 })
	vip := c.Desired().VIPs[0].Addr

	// The API refuses Lease renewals from now on: the leader steps down.
	apiGone.Store(true)
	waitFor(t, 30*time.Second, "the leader steps down", func() bool { return !c.IsLeader() })
	// A rebuild that started after the step-down must have run, counted in
	// rebuilds, not guessed from a sleep (300 ms was not always enough on a
	// busy machine, and then the check below saw the leader's old state).
	// One worker rebuilds, one at a time: of the rebuilds finishing after
	// this read, only the first can have started before it. Two kicks, each
	// awaited, so two finish after it.
	rebuilds := func() uint64 {
		var m dto.Metric
		if err := c.m.syncSeconds.WithLabelValues("desired").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	n0 := rebuilds()
	for i := uint64(1); i <= 2; i++ {
		c.kickDesired()
		waitFor(t, 30*time.Second, "a rebuild after the kick", func() bool { return rebuilds() >= n0+i })
	}
	if d := c.Desired(); len(d.VIPs) != 1 || d.VIPs[0].Addr != vip {
		t.Fatalf("after stepping down the Desired has VIPs %v, want the decided %s kept", d.VIPs, vip)
	}

	// A newer version of the Service (an edit; still no status) says more
	// than the old decision: served from its status from then on.
	svc, err := cs.CoreV1().Services("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations["edited"] = "yes"
	if _, err := cs.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the VIP served from the (empty) status once the cache moved on",
		func() bool { return len(c.Desired().VIPs) == 0 })
}
