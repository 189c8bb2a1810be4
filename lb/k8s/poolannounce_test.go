package k8s

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/edgelb/edgelb/lb"
)

func withAnnounce(u *unstructured.Unstructured, announce map[string]any) *unstructured.Unstructured {
	_ = unstructured.SetNestedMap(u.Object, announce, "spec", "announce")
	return u
}

// TestPoolAnnounceOnGateway (issue 37), on client-go's fakes: a gateway
// running L2 on eth0 and BGP with peer tor1 reports, once each, an IPPool
// naming a peer it does not have and one whose interfaces leave eth0 out
// (a Warning AnnounceNotPossible on the IPPool naming the field and the
// gateway); a pool it can announce as asked raises nothing; the same state
// rebuilt raises nothing again.
func TestPoolAnnounceOnGateway(t *testing.T) {
	an := lb.Announcers{L2Interface: "eth0", BGP: true, BGPPeers: []string{"tor1"}}
	c, _, dyn, ctx := leadingFakeOpts(t, Options{Registerer: prometheus.NewRegistry(), Announcers: &an}, nil,
		withAnnounce(poolObj("peerless", 0, "192.0.2.0/29"), map[string]any{"peers": []any{"tor9"}}),
		withAnnounce(poolObj("elsewhere", 1, "192.0.2.8/29"), map[string]any{"announcers": []any{"l2"}, "interfaces": []any{"eth1"}}),
		withAnnounce(poolObj("fine", 2, "192.0.2.16/29"), map[string]any{"announcers": []any{"bgp"}, "peers": []any{"tor1"}}))
	cs := c.cs
	warnings := func() map[string][]string {
		evs, _ := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		out := map[string][]string{}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == ReasonAnnounce && e.InvolvedObject.Kind == "IPPool" {
				out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e.Message)
			}
		}
		return out
	}
	waitFor(t, 30*time.Second, "two Warnings", func() bool { return len(warnings()) == 2 })
	w := warnings()
	if m := w["peerless"]; len(m) != 1 || !strings.Contains(m[0], "gateway gw1 cannot announce") ||
		!strings.Contains(m[0], `spec.announce.peers[0]`) || !strings.Contains(m[0], "tor9") {
		t.Errorf("peerless: %q", m)
	}
	if m := w["elsewhere"]; len(m) != 1 || !strings.Contains(m[0], "spec.announce.interfaces") || !strings.Contains(m[0], "eth0") {
		t.Errorf("elsewhere: %q", m)
	}
	// A later build (a new pool with a finding of its own, last by name,
	// so its Event is recorded after any repeat of the others') reports
	// only the new pool. Repeats would be new Events or counts > 1 (the
	// recorder folds identical Events into one with a count).
	if _, err := dyn.Resource(IPPoolGVR).Create(ctx, withAnnounce(poolObj("zzz", 3, "192.0.2.24/29"),
		map[string]any{"announcers": []any{"bgp"}, "peers": []any{"tor8"}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new pool's Warning", func() bool { return len(warnings()["zzz"]) == 1 })
	if _, err := c.Manager().Pool(ctx, "fine"); err != nil {
		t.Errorf("pool fine: %v", err)
	}
	evs, _ := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	for _, e := range evs.Items {
		if e.Reason == ReasonAnnounce && (e.Count > 1 || e.InvolvedObject.Name == "fine") {
			t.Errorf("%s: %d× %q", e.InvolvedObject.Name, e.Count, e.Message)
		}
	}
	if n := len(warnings()); n != 3 {
		t.Errorf("%d pools warned, want 3: %v", n, warnings())
	}
}
