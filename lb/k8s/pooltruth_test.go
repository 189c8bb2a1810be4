package k8s

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPoolTruthFake (issue 37) on client-go's fakes: status.used, SIZE
// and the metrics follow Service deletions with no other allocation
// happening; SIZE counts only usable addresses; a pool deleted in use goes
// once its last Service is deleted; automatic assignment takes the lowest
// free address, so a later request above freed lower ones is met.
func TestPoolTruthFake(t *testing.T) {
	reg := prometheus.NewRegistry()
	// 192.0.2.229–.255 with avoidBuggyIPs: 27 addresses, 26 usable (.255).
	p := poolObj("p", 0, "192.0.2.229-192.0.2.255")
	_ = unstructured.SetNestedField(p.Object, true, "spec", "avoidBuggyIPs")
	c, cs, dyn, ctx := leadingFake(t, reg, p)
	svcs := cs.CoreV1().Services("default")
	gvr := dyn.Resource(IPPoolGVR)
	status := func(name string) (size, used int64, gone bool) {
		u, err := gvr.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return 0, 0, true
		}
		if err != nil {
			t.Fatal(err)
		}
		size, _, _ = unstructured.NestedInt64(u.Object, "status", "size")
		used, _, _ = unstructured.NestedInt64(u.Object, "status", "used")
		return size, used, false
	}
	exact := func(name string, size, used int64) func() bool {
		return func() bool {
			s, u, _ := status(name)
			return s == size && u == used &&
				testutil.ToFloat64(c.m.poolUsed.WithLabelValues(name)) == float64(used) &&
				testutil.ToFloat64(c.m.poolSize.WithLabelValues(name)) == float64(size)
		}
	}
	ingress := func(name string) string {
		s, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	for i := 0; i < 10; i++ {
		if _, err := svcs.Create(ctx, lbService(fmt.Sprintf("s%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "status.used 10, size 26", exact("p", 26, 10))
	// Lowest free first: s0..s9 in creation order got .229 upwards.
	waitFor(t, 30*time.Second, "s0 on .229", func() bool { return ingress("s0") == "192.0.2.229" })

	// Deleting Services is the only change: status and metric follow.
	for i := 1; i < 10; i++ {
		if err := svcs.Delete(ctx, fmt.Sprintf("s%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "status.used 1 after 9 deletions", exact("p", 26, 1))

	// The stuck-pool sequence: deleted in use, then its last Service.
	if err := gvr.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "p deleting in use", func() bool {
		u, err := gvr.Get(ctx, "p", metav1.GetOptions{})
		return err == nil && u.GetDeletionTimestamp() != nil
	})
	if err := svcs.Delete(ctx, "s0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "p gone after its last Service", func() bool { _, _, gone := status("p"); return gone })
	waitFor(t, 30*time.Second, "p's metric series gone", func() bool {
		return testutil.CollectAndCount(c.m.poolUsed) == 0 && testutil.CollectAndCount(c.m.poolSize) == 0
	})

	// A requested address after automatic ones, with lower ones freed.
	if _, err := gvr.Create(ctx, poolObj("q", time.Second, "198.51.100.0/29"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a0", "a1", "a2", "a3"} {
		if _, err := svcs.Create(ctx, lbService(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, n+" assigned", func() bool { return ingress(n) != "" })
	}
	for _, n := range []string{"a0", "a1"} {
		if err := svcs.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "q used 2", exact("q", 8, 2))
	for _, n := range []string{"b0", "b1"} {
		if _, err := svcs.Create(ctx, lbService(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, n+" assigned", func() bool { return ingress(n) != "" })
	}
	if _, err := svcs.Create(ctx, lbService("req", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "198.51.100.4" }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "req holds its requested 198.51.100.4", func() bool { return ingress("req") == "198.51.100.4" })
	got := map[string]string{}
	for _, n := range []string{"a2", "a3", "b0", "b1"} {
		got[n] = ingress(n)
	}
	want := map[string]string{"a2": "198.51.100.2", "a3": "198.51.100.3", "b0": "198.51.100.0", "b1": "198.51.100.1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("automatic addresses %v, want the lowest free %v", got, want)
	}
	waitFor(t, 30*time.Second, "q used 5", exact("q", 8, 5))
}
