//go:build k8s

package k8s

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestK8sAdoption: a controller starting on a cluster whose Services already
// carry addresses (written by an earlier edgelb, or by MetalLB before a
// migration) keeps every one of them, gives new Services only free
// addresses, and resolves a duplicate claim in favour of the older Service.
func TestK8sAdoption(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "small", true, "192.0.2.0/29")
	const ns = "apps"
	setStatus := func(name, ip string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": []map[string]any{{"ip": ip}}}}})
		if _, err := e.cs.CoreV1().Services(ns).Patch(e.ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	// Created oldest first: creation timestamps have 1 s resolution.
	e.svc(t, ns, "old-a")
	setStatus("old-a", "192.0.2.5")
	e.svc(t, ns, "old-c")
	setStatus("old-c", "192.0.2.6")
	time.Sleep(1100 * time.Millisecond)
	e.svc(t, ns, "dup-b")
	setStatus("dup-b", "192.0.2.5") // claims old-a's address
	e.svc(t, ns, "new-d")
	// Edited while no controller ran: holds .3, now asks for .2.
	e.svc(t, ns, "edited-e", ann(AnnotationIPs, "192.0.2.2"))
	setStatus("edited-e", "192.0.2.3")

	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)
	e.waitIngress(t, ns, "old-a", 30*time.Second, "192.0.2.5")
	e.waitIngress(t, ns, "old-c", 30*time.Second, "192.0.2.6")
	b := e.waitAny(t, ns, "dup-b", 1, 30*time.Second)
	waitUntil(t, 30*time.Second, "dup-b moved", func() bool { g := e.ingress(ns, "dup-b"); return len(g) == 1 && g[0] != "192.0.2.5" })
	b = e.ingress(ns, "dup-b")
	d := e.waitAny(t, ns, "new-d", 1, 30*time.Second)
	ev := e.waitEvent(t, ns, "dup-b", corev1.EventTypeWarning, ReasonFailed, "192.0.2.5", 30*time.Second)
	e.waitIngress(t, ns, "edited-e", 30*time.Second, "192.0.2.2")
	t.Logf("adoption: old-a keeps 192.0.2.5, old-c keeps 192.0.2.6, dup-b (younger duplicate) moved to %s with Warning %q, new-d got %s, edited-e moved 192.0.2.3 → the requested 192.0.2.2",
		b[0], ev.Message, d[0])
	if b[0] == d[0] || d[0] == "192.0.2.5" || d[0] == "192.0.2.6" {
		t.Fatalf("dup-b %v new-d %v", b, d)
	}
}
