//go:build k8s

package k8s

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// selPool creates an IPPool with a serviceAllocation (nil: none).
func (e *env) selPool(t testing.TB, name string, sa map[string]any, addrs ...string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(IPPoolGVK)
	u.SetName(name)
	a := make([]any, len(addrs))
	for i, s := range addrs {
		a[i] = s
	}
	spec := map[string]any{"addresses": a}
	if sa != nil {
		spec["serviceAllocation"] = sa
	}
	u.Object["spec"] = spec
	if _, err := e.dyn.Resource(IPPoolGVR).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create IPPool %s: %v", name, err)
	}
}

func labelled(kv ...string) svcOpt {
	return func(s *corev1.Service) {
		s.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Labels[kv[i]] = kv[i+1]
		}
	}
}

// TestK8sPoolSelectors: IPPools with MetalLB's serviceAllocation on the
// real API server. Services in two namespaces get the addresses MetalLB
// would pick (admitting pools by priority, then pools without rules; the
// lowest free address); a pool requested by annotation or holding a
// requested IP that excludes the Service is refused with a Warning. A
// priority change and a label that makes a better pool match move nothing;
// a namespace label removed so a pool no longer admits its Services moves
// them (make before break), as MetalLB moves them.
func TestK8sPoolSelectors(t *testing.T) {
	e := newEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blue",
		Labels: map[string]string{"team": "blue"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.selPool(t, "shared", nil, "192.0.2.0/29")
	e.selPool(t, "team", map[string]any{"priority": int64(10),
		"namespaceSelectors": []any{map[string]any{"matchLabels": map[string]any{"team": "blue"}}}}, "198.51.100.0/29")
	e.selPool(t, "premium", map[string]any{"priority": int64(20),
		"serviceSelectors": []any{map[string]any{"matchExpressions": []any{
			map[string]any{"key": "tier", "operator": "In", "values": []any{"premium", "gold"}}}}}}, "203.0.113.0/29")
	r := e.start(t, testOptions("gw1"))

	const limit = 20 * time.Second
	e.svc(t, "apps", "plain")
	e.waitIngress(t, "apps", "plain", limit, "192.0.2.0") // no pool with rules admits it
	e.svc(t, "blue", "b")
	e.waitIngress(t, "blue", "b", limit, "198.51.100.0") // namespace selector
	e.svc(t, "blue", "p", labelled("tier", "premium"))
	e.waitIngress(t, "blue", "p", limit, "198.51.100.1") // team (10) and premium (20) admit: 10 first
	e.svc(t, "apps", "p2", labelled("tier", "premium"))
	e.waitIngress(t, "apps", "p2", limit, "203.0.113.0") // service selector in any namespace

	// Explicit requests must be admitted too.
	e.svc(t, "apps", "wants-team", ann(AnnotationPool, "team"))
	e.waitEvent(t, "apps", "wants-team", corev1.EventTypeWarning, ReasonFailed, `pool "team" does not admit service "apps/wants-team"`, limit)
	e.svc(t, "apps", "wants-ip", ann(AnnotationIPs, "198.51.100.5"))
	e.waitEvent(t, "apps", "wants-ip", corev1.EventTypeWarning, ReasonFailed, `pool "team" does not admit`, limit)
	e.svc(t, "blue", "wants-ip", ann(AnnotationIPs, "198.51.100.5"))
	e.waitIngress(t, "blue", "wants-ip", limit, "198.51.100.5")
	if got := e.ingress("apps", "wants-team"); len(got) != 0 {
		t.Fatalf("apps/wants-team got %v from a pool that excludes it", got)
	}

	// Priority change: premium 20 → 5. New choices follow it; held addresses stay.
	patch := func(name, body string) {
		t.Helper()
		if _, err := e.dyn.Resource(IPPoolGVR).Patch(e.ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("premium", `{"spec":{"serviceAllocation":{"priority":5}}}`)
	// The leader's allocator has the new pools (t.pools and ReplacePools
	// change in one keeper operation) before p3 asks: p3's result cannot depend on
	// which watch event came first.
	waitUntil(t, limit, "leader uses premium priority 5", func() bool {
		tm := r.c.view().term
		if tm == nil {
			return false
		}
		found := false
		r.c.do(func(*keeper) {
			for _, p := range tm.pools.Valid {
				if p.Name == "premium" && p.Allocation != nil && p.Allocation.Priority == 5 {
					found = true
				}
			}
		})
		return found
	})
	e.svc(t, "blue", "p3", labelled("tier", "gold"))
	e.waitIngress(t, "blue", "p3", limit, "203.0.113.1") // premium (5) now before team (10)
	// Every Service was re-queued when the pools changed, ahead of p3 (one
	// worker, FIFO): p was reconciled under the new priorities and kept its address.
	if got := e.ingress("blue", "p"); len(got) != 1 || got[0] != "198.51.100.1" {
		t.Fatalf("blue/p after the priority change: %v, want it kept at 198.51.100.1", got)
	}

	// A label that makes a better pool match: plain (shared, no rules) is
	// now also admitted by premium; it keeps its address.
	s, err := e.cs.CoreV1().Services("apps").Get(e.ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"tier": "premium"}
	if _, err := e.cs.CoreV1().Services("apps").Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.svc(t, "apps", "marker") // queued after plain's update
	e.waitIngress(t, "apps", "marker", limit, "192.0.2.1")
	if got := e.ingress("apps", "plain"); len(got) != 1 || got[0] != "192.0.2.0" {
		t.Fatalf("apps/plain after gaining tier=premium: %v, want it kept at 192.0.2.0", got)
	}

	// The namespace loses team=blue: team no longer admits blue's Services.
	// b moves to shared; p (tier=premium) to premium; wants-ip asked for
	// 198.51.100.5 exactly and keeps it, with a Warning.
	t0 := time.Now()
	ns, err := e.cs.CoreV1().Namespaces().Get(e.ctx, "blue", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"team": "red"}
	if _, err := e.cs.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitIngress(t, "blue", "b", limit, "192.0.2.2")
	e.waitIngress(t, "blue", "p", limit, "203.0.113.2")
	fmt.Printf("MEASURED pool selectors: namespace label change to both Services moved: %s\n", time.Since(t0).Round(time.Millisecond))
	e.waitEvent(t, "blue", "b", corev1.EventTypeNormal, ReasonMoved, "moved from 198.51.100.0 to 192.0.2.2", limit)
	e.waitEvent(t, "blue", "wants-ip", corev1.EventTypeWarning, ReasonFailed, "keeps requested 198.51.100.5", limit)
	if got := e.ingress("blue", "wants-ip"); len(got) != 1 || got[0] != "198.51.100.5" {
		t.Fatalf("blue/wants-ip: %v", got)
	}
	// team's addresses are free again: used 1 (wants-ip) in its status.
	waitUntil(t, limit, "team status used=1", func() bool {
		_, used, _, _ := e.poolStatus(t, "team")
		return used == 1
	})
}
