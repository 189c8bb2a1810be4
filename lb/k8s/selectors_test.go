package k8s

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lb"
)

// TestPoolSelectorsFake: the controller on client-go fakes gives a Service
// in a namespace labelled team=blue the selected pool's address, and moves
// it make-before-break when the namespace loses the label (the Namespace
// informer re-queues its Services). The real API server version with
// priorities is TestK8sPoolSelectors.
func TestPoolSelectorsFake(t *testing.T) {
	team := poolObj("team", 0, "198.51.100.0/30")
	p, err := poolFromObject(team, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Allocation = &lb.ServiceAllocation{Priority: 10,
		NamespaceSelectors: []lb.LabelSelector{{MatchLabels: map[string]string{"team": "blue"}}}}
	setPoolSpec(team, p)
	c, cs, _, ctx := leadingFake(t, nil, poolObj("shared", 0, "192.0.2.0/30"), team)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blue", Labels: map[string]string{"team": "blue"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingress := func(ns, name string) string {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	// The namespace is in the informer before the Service asks.
	waitFor(t, 30*time.Second, "namespace blue cached", func() bool { return c.namespaceLabels("blue")["team"] == "blue" })
	for _, s := range []*corev1.Service{lbService("b", func(s *corev1.Service) { s.Namespace = "blue" }), lbService("d")} {
		if _, err := cs.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "blue/b from team", func() bool { return ingress("blue", "b") == "198.51.100.0" })
	waitFor(t, 30*time.Second, "default/d from shared", func() bool { return ingress("default", "d") == "192.0.2.0" })

	ns.Labels = map[string]string{"team": "red"}
	if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "blue/b moved to shared", func() bool { return ingress("blue", "b") == "192.0.2.1" })
	waitFor(t, 30*time.Second, "Normal IPMoved naming the move", func() bool {
		evs, _ := cs.CoreV1().Events("blue").List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeNormal && e.Reason == ReasonMoved && strings.Contains(e.Message, `moved from 198.51.100.0 to 192.0.2.1: pool "team" does not admit service "blue/b"`) {
				return true
			}
		}
		return false
	})
}
