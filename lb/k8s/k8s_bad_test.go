//go:build k8s

package k8s

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestK8sBadObjects: malformed pools are refused by the schema, pools the
// schema cannot judge (overlaps, reversed ranges) get a Warning Event and
// Valid=False quoting the value, a malformed annotation gets a Warning
// quoting it — and nothing else changes.
func TestK8sBadObjects(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "good", true, "192.0.2.0/28")
	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leadership", r.c.IsLeader)
	const ns = "apps"
	e.svc(t, ns, "web")
	web := e.waitAny(t, ns, "web", 1, 30*time.Second)

	// Refused at admission by the CRD's validation rules.
	for _, bad := range []string{"192.0.2.300/24", "192.0.2.1/24", "not-an-ip", "192.0.2.1-2001:db8::1", "192.0.2.5-foo"} {
		err := e.tryPool("refused", true, bad)
		if err == nil {
			t.Fatalf("pool with %q accepted by the apiserver", bad)
		}
		if !strings.Contains(err.Error(), bad) {
			t.Fatalf("refusal does not quote %q: %v", bad, err)
		}
		t.Logf("schema refused %-24q: %v", bad, err)
	}
	if err := e.tryPool("empty", true); err == nil {
		t.Fatal("pool without addresses accepted")
	} else {
		t.Logf("schema refused no addresses: %v", err)
	}

	// Accepted by the schema, refused by the controller.
	e.pool(t, "overlap", true, "192.0.2.8/29")
	e.pool(t, "reversed", true, "198.51.100.9-198.51.100.1")
	ev := e.waitEvent(t, "default", "overlap", corev1.EventTypeWarning, ReasonBadPool, `"192.0.2.8/29"`, 30*time.Second)
	t.Logf("overlap: Warning %q", ev.Message)
	ev = e.waitEvent(t, "default", "reversed", corev1.EventTypeWarning, ReasonBadPool, `"198.51.100.9-198.51.100.1"`, 30*time.Second)
	t.Logf("reversed: Warning %q", ev.Message)
	waitUntil(t, 30*time.Second, "Valid=False on bad pools", func() bool {
		_, _, v1, m1 := e.poolStatus(t, "overlap")
		_, _, v2, _ := e.poolStatus(t, "reversed")
		return v1 == "False" && v2 == "False" && strings.Contains(m1, "192.0.2.8/29")
	})
	_, _, valid, _ := e.poolStatus(t, "good")
	if valid != "True" {
		t.Fatalf("good pool Valid=%q", valid)
	}

	// A malformed annotation: Warning quoting it, no address.
	e.svc(t, ns, "typo", ann(AnnotationIPs, "192.0.2.300"))
	ev = e.waitEvent(t, ns, "typo", corev1.EventTypeWarning, ReasonFailed, `"192.0.2.300"`, 30*time.Second)
	t.Logf("annotation: Warning %q", ev.Message)
	e.svc(t, ns, "typo-metallb", ann(MetalLBAnnotationIPs, "2001:db8::zz"))
	ev = e.waitEvent(t, ns, "typo-metallb", corev1.EventTypeWarning, ReasonFailed, `"2001:db8::zz"`, 30*time.Second)
	t.Logf("metallb annotation: Warning %q", ev.Message)

	// Edit a working Service into a malformed annotation: it keeps its address.
	s, err := e.cs.CoreV1().Services(ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Annotations = map[string]string{AnnotationIPs: "192.0.2.1/32"}
	if _, err := e.cs.CoreV1().Services(ns).Update(e.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = e.waitEvent(t, ns, "web", corev1.EventTypeWarning, ReasonFailed, `"192.0.2.1/32"`, 30*time.Second)
	t.Logf("edited annotation: Warning %q", ev.Message)

	// Nothing else changed: give the controller a moment, then compare.
	time.Sleep(time.Second)
	if got := e.ingress(ns, "web"); len(got) != 1 || got[0] != web[0] {
		t.Fatalf("web changed from %v to %v", web, got)
	}
	for _, n := range []string{"typo", "typo-metallb"} {
		if got := e.ingress(ns, n); len(got) != 0 {
			t.Fatalf("%s got %v", n, got)
		}
	}
	size, used, valid, _ := e.poolStatus(t, "good")
	if size != 16 || used != 1 || valid != "True" {
		t.Fatalf("good pool status size %d used %d valid %s", size, used, valid)
	}
	t.Logf("unchanged: web keeps %v; good pool size %d used %d Valid=%s; the bad objects got nothing", web, size, used, valid)
}
