package k8s

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// TestLeaderAssignsRequestsFirst (issue 13): Services already in the API
// when a leader starts — 40 automatic ones named to sort first, 8 that
// request the very addresses automatic allocation would pick first — all
// get what they ask for: a new term reconciles requesters before anyone is
// allocated automatically.
func TestLeaderAssignsRequestsFirst(t *testing.T) {
	var objs []runtime.Object
	want := map[string]string{}
	for i := 0; i < 40; i++ {
		objs = append(objs, lbService(fmt.Sprintf("a-auto-%02d", i)))
	}
	for i := 0; i < 8; i++ {
		ip := fmt.Sprintf("192.0.2.%d", 1+i)
		want[fmt.Sprintf("z-req-%d", i)] = ip
		objs = append(objs, lbService(fmt.Sprintf("z-req-%d", i), func(s *corev1.Service) { s.Spec.LoadBalancerIP = ip }))
	}
	cs := fake.NewClientset(objs...)
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "edgelb.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "ippools", Kind: "IPPool"}}}}
	dyn := fakePoolAPI(poolObj("p", 0, "192.0.2.1-192.0.2.48")) // exactly 48: every address is needed
	c, err := New(cs, dyn, Options{NodeName: "gw1", HandleClassless: true, LeaseDuration: time.Second, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	got := map[string]string{}
	waitFor(t, 20*time.Second, "48 Services with an address", func() bool {
		list, err := cs.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		got = map[string]string{}
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				got[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
			}
		}
		return len(got) == 48
	})
	met := 0
	for name, ip := range want {
		if got[name] == ip {
			met++
		} else {
			t.Errorf("%s requested %s, got %q", name, ip, got[name])
		}
	}
	t.Logf("%d of %d requests met with 40 automatic Services named to sort first", met, len(want))
}
