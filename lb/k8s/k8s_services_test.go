//go:build k8s

package k8s

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestK8sServices: create, update and delete LoadBalancer Services against a
// real apiserver and check status and Events: class, requested IPs, MetalLB
// annotations, sharing, dual-stack, and exhaustion then recovery.
func TestK8sServices(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "main", true, "192.0.2.0/28", "2001:db8::/124")
	e.pool(t, "blue", false, "198.51.100.0/29")
	e.pool(t, "tiny", false, "203.0.113.0/31")
	// Requested addresses come from a pool nothing is auto-assigned from.
	e.pool(t, "fixed", false, "192.0.2.64/28", "2001:db8::100/124")
	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leadership", r.c.IsLeader)
	const ns = "apps"
	wait := 5 * time.Second

	// Auto-assign, first address of the first auto pool, with an Event.
	e.svc(t, ns, "auto")
	e.waitIngress(t, ns, "auto", wait, "192.0.2.0")
	ev := e.waitEvent(t, ns, "auto", corev1.EventTypeNormal, ReasonAllocated, "192.0.2.0", wait)
	t.Logf("auto: 192.0.2.0, event %q", ev.Message)
	// The status condition, accepted by the real API server's validation.
	waitUntil(t, wait, "condition "+ConditionAddress, func() bool {
		s, err := e.cs.CoreV1().Services(ns).Get(e.ctx, "auto", metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(s.Status.Conditions, ConditionAddress)
		if c != nil && c.Status == metav1.ConditionTrue {
			t.Logf("auto: condition %s=%s reason %s message %q", c.Type, c.Status, c.Reason, c.Message)
		}
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonCondAssigned && strings.Contains(c.Message, "192.0.2.0")
	})

	// Other class and class-less: untouched.
	e.svc(t, ns, "other", class("other.io/lb"))
	e.svc(t, ns, "classless", func(s *corev1.Service) { s.Spec.LoadBalancerClass = nil })

	// Requested: spec.loadBalancerIP, edgelb.io and metallb.io annotations, pools.
	e.svc(t, ns, "spec-ip", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.73" })
	e.svc(t, ns, "ann-ip", ann(AnnotationIPs, "192.0.2.74"))
	e.svc(t, ns, "metallb-ip", ann(MetalLBAnnotationIPs, "192.0.2.75"))
	e.svc(t, ns, "metallb-pool", ann(MetalLBAnnotationPool, "blue"))
	e.svc(t, ns, "ann-pool", ann(AnnotationPool, "blue"))
	e.waitIngress(t, ns, "spec-ip", wait, "192.0.2.73")
	e.waitIngress(t, ns, "ann-ip", wait, "192.0.2.74")
	e.waitIngress(t, ns, "metallb-ip", wait, "192.0.2.75")
	mp := e.waitAny(t, ns, "metallb-pool", 1, wait)
	ap := e.waitAny(t, ns, "ann-pool", 1, wait)
	if !strings.HasPrefix(mp[0], "198.51.100.") || !strings.HasPrefix(ap[0], "198.51.100.") || mp[0] == ap[0] {
		t.Fatalf("pool annotations: metallb-pool %v ann-pool %v", mp, ap)
	}
	t.Logf("requested: spec.loadBalancerIP→192.0.2.73, edgelb.io IP→192.0.2.74, metallb.io IP→192.0.2.75, metallb.io pool→%s, edgelb.io pool→%s", mp[0], ap[0])

	// Sharing: same key, disjoint ports → one address; a clash on port → another.
	e.svc(t, ns, "share-a", ann(AnnotationShared, "k1"), ports(80))
	a := e.waitAny(t, ns, "share-a", 1, wait)
	e.svc(t, ns, "share-b", ann(MetalLBAnnotationSh, "k1"), ports(443))
	e.waitIngress(t, ns, "share-b", wait, a[0])
	e.svc(t, ns, "share-c", ann(AnnotationShared, "k1"), ports(80))
	c := e.waitAny(t, ns, "share-c", 1, wait)
	if c[0] == a[0] {
		t.Fatalf("share-c got %s although port 80 is taken there", c[0])
	}
	t.Logf("sharing: share-a(80) and share-b(443, metallb key) on %s; share-c(80) on %s", a[0], c[0])

	// Dual-stack per ipFamilies/ipFamilyPolicy.
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	e.svc(t, ns, "dual", families(corev1.IPFamilyPolicyRequireDualStack, v4, v6))
	d := e.waitAny(t, ns, "dual", 2, wait)
	e.svc(t, ns, "v6only", families(corev1.IPFamilyPolicySingleStack, v6))
	s6 := e.waitAny(t, ns, "v6only", 1, wait)
	e.svc(t, ns, "prefer", families(corev1.IPFamilyPolicyPreferDualStack, v6, v4))
	p := e.waitAny(t, ns, "prefer", 2, wait)
	e.svc(t, ns, "dual-req", families(corev1.IPFamilyPolicyRequireDualStack, v4, v6), ann(AnnotationIPs, "192.0.2.76,2001:db8::10c"))
	e.waitIngress(t, ns, "dual-req", wait, "192.0.2.76", "2001:db8::10c")
	if !strings.Contains(d[1], ":") || !strings.Contains(s6[0], ":") || !strings.Contains(p[1], ":") {
		t.Fatalf("families: dual %v v6only %v prefer %v", d, s6, p)
	}
	t.Logf("dual-stack: RequireDualStack %v, SingleStack IPv6 %v, PreferDualStack %v, requested pair [192.0.2.76 2001:db8::10c]", d, s6, p)

	// Nothing for the other class or class-less Services.
	if got := e.ingress(ns, "other"); len(got) != 0 {
		t.Fatalf("other class got %v", got)
	}
	if got := e.ingress(ns, "classless"); len(got) != 0 {
		t.Fatalf("class-less got %v", got)
	}

	// Update: move the requested address; the old one frees.
	patch := func(name string, mut func(*corev1.Service)) {
		t.Helper()
		for {
			s, err := e.cs.CoreV1().Services(ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mut(s)
			if _, err = e.cs.CoreV1().Services(ns).Update(e.ctx, s, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
	}
	patch("ann-ip", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "192.0.2.77" })
	e.waitIngress(t, ns, "ann-ip", wait, "192.0.2.77")
	e.waitEvent(t, ns, "ann-ip", corev1.EventTypeNormal, ReasonReleased, "192.0.2.74", wait)
	e.svc(t, ns, "takes-74", ann(AnnotationIPs, "192.0.2.74"))
	e.waitIngress(t, ns, "takes-74", wait, "192.0.2.74")
	t.Log("update: ann-ip moved 192.0.2.74 → 192.0.2.77; takes-74 then got 192.0.2.74")

	// Type changed away from LoadBalancer: address released and status cleared.
	patch("spec-ip", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
		s.Spec.LoadBalancerIP = ""
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
		s.Spec.AllocateLoadBalancerNodePorts = nil
		s.Spec.ExternalTrafficPolicy = ""
	})
	e.waitIngress(t, ns, "spec-ip", wait)
	e.svc(t, ns, "takes-73", ann(AnnotationIPs, "192.0.2.73"))
	e.waitIngress(t, ns, "takes-73", wait, "192.0.2.73")

	// Delete frees the address.
	e.deleteSvc(t, ns, "metallb-ip")
	e.svc(t, ns, "takes-75", ann(AnnotationIPs, "192.0.2.75"))
	e.waitIngress(t, ns, "takes-75", wait, "192.0.2.75")
	t.Log("delete: metallb-ip deleted; takes-75 got 192.0.2.75")

	// Exhaustion: pool tiny has 2 addresses; the third Service waits with a
	// Warning and gets the address within a moment of one freeing.
	e.svc(t, ns, "t1", ann(AnnotationPool, "tiny"))
	e.svc(t, ns, "t2", ann(AnnotationPool, "tiny"))
	t1 := e.waitAny(t, ns, "t1", 1, wait)
	e.waitAny(t, ns, "t2", 1, wait)
	e.svc(t, ns, "t3", ann(AnnotationPool, "tiny"))
	w := e.waitEvent(t, ns, "t3", corev1.EventTypeWarning, ReasonFailed, "no address available", wait)
	t.Logf("exhausted: t3 pending, Warning %q", w.Message)
	if got := e.ingress(ns, "t3"); len(got) != 0 {
		t.Fatalf("t3 got %v from an exhausted pool", got)
	}
	watcher, err := e.cs.CoreV1().Services(ns).Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=t3"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	t0 := time.Now()
	e.deleteSvc(t, ns, "t1")
	// The controller has no periodic resync: a pending Service is retried
	// only on an event, so a missing retry never assigns it. 30 s bounds
	// that hang; the time is the MEASURED figure (goal ≤ 1 s), which a
	// busy machine can stretch.
	var took time.Duration
	hang := time.After(30 * time.Second)
wait:
	for {
		select {
		case ev, open := <-watcher.ResultChan():
			if !open {
				break wait
			}
			s, ok := ev.Object.(*corev1.Service)
			if ok && ev.Type == watch.Modified && len(s.Status.LoadBalancer.Ingress) > 0 {
				took = time.Since(t0)
				if s.Status.LoadBalancer.Ingress[0].IP != t1[0] {
					t.Fatalf("t3 got %s, want the freed %s", s.Status.LoadBalancer.Ingress[0].IP, t1[0])
				}
				break wait
			}
		case <-hang:
			break wait
		}
	}
	if took == 0 {
		t.Fatalf("pending Service not assigned within 30 s of another Service freeing an IP")
	}
	t.Logf("MEASURED pending→assigned after another Service freed an IP: %s (goal ≤ 1 s)", took.Round(time.Microsecond))

	// Pool status and metrics-backed Manager view.
	waitUntil(t, 30*time.Second, "pool status", func() bool {
		size, used, valid, _ := e.poolStatus(t, "tiny")
		return size == 2 && used == 2 && valid == "True"
	})
	size, used, _, _ := e.poolStatus(t, "main")
	t.Logf("IPPool main status: size %d used %d", size, used)
	pools, err := r.c.Manager().Pools(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		t.Logf("Manager pool %-5s size %d used %d", p.Name, p.Size, p.Used)
	}
}
