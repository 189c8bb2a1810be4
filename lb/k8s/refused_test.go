package k8s

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRefusedRaisesWarning (issue 14): a port this gateway's dataplane
// refused raises one Warning Event (DataplaneRefused) on its Service with the
// reason; the same refusal again raises none. edgelb_k8s_refused_services
// counts the Service once, however many of its ports were refused.
func TestRefusedRaisesWarning(t *testing.T) {
	c, cs, _, ctx := leadingFake(t, prometheus.NewRegistry(), poolObj("p", 0, "192.0.2.0/28"))
	if _, err := cs.CoreV1().Services("default").Create(ctx, lbService("dual"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the Service in the cache", func() bool {
		_, err := c.services.Services("default").Get("dual")
		return err == nil
	})
	refused := map[string]string{"default/dual/http/nodeport": "nft: backend family differs", "default/dual/https": "nft: backend family differs"}
	gauge := func() float64 { return testutil.ToFloat64(c.m.refused.WithLabelValues("dataplane")) }
	count := func() int {
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		n := 0
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "dual" && e.Type == corev1.EventTypeWarning && e.Reason == ReasonRefused &&
				strings.Contains(e.Message, "backend family differs") {
				n++
			}
		}
		return n
	}
	if err := c.SetRefused(ctx, refused); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a DataplaneRefused Warning", func() bool { return count() >= 1 })
	if g := gauge(); g != 1 {
		t.Errorf("edgelb_k8s_refused_services{source=dataplane} %v, want 1 (one Service)", g)
	}
	if err := c.SetRefused(ctx, refused); err != nil {
		t.Fatal(err)
	}
	var n int
	c.do(func(k *keeper) { n = len(k.refused) })
	if n != 1 {
		t.Errorf("%d refusals remembered, want 1", n)
	}
	if err := c.SetRefused(ctx, nil); err != nil {
		t.Fatal(err)
	}
	c.do(func(k *keeper) { n = len(k.refused) })
	if n != 0 {
		t.Errorf("a cleared refusal is still remembered")
	}
	if g := gauge(); g != 0 {
		t.Errorf("edgelb_k8s_refused_services{source=dataplane} %v after the clear, want 0", g)
	}
}
