package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestControllerFake drives the whole controller against client-go's fakes:
// allocation, pending with a Warning, assignment when an address frees.
func TestControllerFake(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cs, _, ctx := leadingFake(t, reg, poolObj("small", 0, "192.0.2.0/30"))

	for i := 0; i < 5; i++ {
		if _, err := cs.CoreV1().Services("default").Create(ctx, lbService(fmt.Sprintf("s%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress := func(name string) string {
		s, err := cs.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	waitFor(t, 30*time.Second, "4 services assigned", func() bool {
		n := 0
		for i := 0; i < 5; i++ {
			if ingress(fmt.Sprintf("s%d", i)) != "" {
				n++
			}
		}
		return n == 4
	})
	pendingName := ""
	for i := 0; i < 5; i++ {
		if ingress(fmt.Sprintf("s%d", i)) == "" {
			pendingName = fmt.Sprintf("s%d", i)
		}
	}
	waitFor(t, 30*time.Second, "Warning event", func() bool {
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == pendingName && e.Type == corev1.EventTypeWarning && e.Reason == ReasonFailed &&
				strings.Contains(e.Message, "no address available") {
				return true
			}
		}
		return false
	})
	victim := "s0"
	if pendingName == "s0" {
		victim = "s1"
	}
	freed := ingress(victim)
	if err := cs.CoreV1().Services("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "pending service assigned", func() bool { return ingress(pendingName) == freed })

	ps, err := c.Manager().Pools(ctx)
	if err != nil || len(ps) != 1 || ps[0].Size != 4 {
		t.Fatalf("pools %+v %v", ps, err)
	}
	waitFor(t, 30*time.Second, "pool used 4", func() bool {
		ps, _ := c.Manager().Pools(ctx)
		return ps[0].Used == 4
	})
	if _, _, err := c.Manager().PutService(ctx, c.Manager().(manager).serviceStatus(lbService("x")).Spec); err == nil {
		t.Fatal("PutService accepted in Kubernetes mode")
	}
	waitFor(t, 30*time.Second, "4 VIPs in the desired state", func() bool { return len(c.Desired().VIPs) == 4 })

	waitFor(t, 30*time.Second, "pool metrics", func() bool {
		return testutil.ToFloat64(c.m.poolUsed.WithLabelValues("small")) == 4 && testutil.ToFloat64(c.m.poolSize.WithLabelValues("small")) == 4
	})
	if got := testutil.ToFloat64(c.m.allocations.WithLabelValues("assigned")); got != 5 {
		t.Fatalf("assigned %v, want 5", got)
	}
	if got := testutil.ToFloat64(c.m.pending); got != 0 {
		t.Fatalf("pending %v, want 0", got)
	}
	names := map[string]bool{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"edgelb_k8s_pool_size", "edgelb_k8s_pool_used", "edgelb_k8s_allocations_total",
		"edgelb_k8s_pending_services", "edgelb_k8s_leader", "edgelb_k8s_sync_duration_seconds", "edgelb_k8s_refused_services"} {
		if !names[n] {
			t.Errorf("metric %s not registered", n)
		}
	}
}

// leadingFake runs a Controller against client-go's fakes (the IPPool
// resource known, pools as given) until the test ends, and waits until it
// leads.
func leadingFake(t *testing.T, reg prometheus.Registerer, pools ...runtime.Object) (*Controller, *fake.Clientset, *dynamicfake.FakeDynamicClient, context.Context) {
	t.Helper()
	return leadingFakeWith(t, reg, nil, pools...)
}

// leadingFakeWith is leadingFake with prep run on the clientset before the
// controller starts: client-go's Fake adds reactors without its lock, so a
// reactor added while the controller calls the fake is a data race (go test
// -race); a test that changes the fake's behaviour later installs a reactor
// here and switches it with an atomic.
func leadingFakeWith(t *testing.T, reg prometheus.Registerer, prep func(*fake.Clientset), pools ...runtime.Object) (*Controller, *fake.Clientset, *dynamicfake.FakeDynamicClient, context.Context) {
	t.Helper()
	return leadingFakeOpts(t, Options{Registerer: reg}, prep, pools...)
}

// leadingFakeOpts is leadingFakeWith with more options (the test's own
// NodeName, lease timings and class defaults are set here).
func leadingFakeOpts(t *testing.T, o Options, prep func(*fake.Clientset), pools ...runtime.Object) (*Controller, *fake.Clientset, *dynamicfake.FakeDynamicClient, context.Context) {
	t.Helper()
	o.NodeName, o.HandleClassless, o.LeaseDuration, o.RetryPeriod = "gw1", true, time.Second, 100*time.Millisecond
	cs := fake.NewClientset()
	if prep != nil {
		prep(cs)
	}
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "edgelb.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "ippools", Kind: "IPPool"}}}}
	dyn := fakePoolAPI(pools...)
	c, err := New(cs, dyn, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 30*time.Second, "leader", c.IsLeader)
	return c, cs, dyn, ctx
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestControllerNoCRD(t *testing.T) {
	cs := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{IPPoolGVR: "IPPoolList"})
	c, err := New(cs, dyn, Options{NodeName: "gw1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, ErrNoCRD) {
		t.Fatalf("Run without the CRD: %v, want ErrNoCRD", err)
	}
}
