package nft

import (
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestPlanNodePortPerFamily (issue 14): one node port served in both
// families is two services (Key.Family), each rendered in its own family's
// maps, with no frontend clash between them. Swapping their positions in
// the Config finds each one's own state (the same-position fast path
// compares whole keys).
func TestPlanNodePortPerFamily(t *testing.T) {
	d := newModel()
	v4 := proxy.Service{Name: "web", NodePort: 30080, Protocol: proxy.TCP, Family: proxy.IPv4, Backends: []proxy.Backend{be("10.0.0.2:80", 1)}}
	v6 := proxy.Service{Name: "web", NodePort: 30080, Protocol: proxy.TCP, Family: proxy.IPv6, Backends: []proxy.Backend{be("[fd00::2]:80", 1)}}
	ch, err := d.plan(proxy.Config{Services: []proxy.Service{v4, v6}})
	if err != nil || len(ch.failed) != 0 {
		t.Fatalf("plan: %v %v", err, ch.failed)
	}
	if len(ch.upserts) != 2 || ch.upserts[0].v6 || !ch.upserts[1].v6 {
		t.Fatalf("upserts %d, want an IPv4 then an IPv6 node-port service", len(ch.upserts))
	}
	d.commit(ch)
	ch, err = d.plan(proxy.Config{Services: []proxy.Service{v6, v4}})
	if err != nil || len(ch.failed) != 0 || len(ch.upserts) != 0 || len(ch.removes) != 0 {
		t.Fatalf("same services, swapped: err %v failed %v upserts %d removes %d, want nothing to do", err, ch.failed, len(ch.upserts), len(ch.removes))
	}
	// An IPv6 node-port service with no backend yet keeps its family.
	empty := v6
	empty.Backends = nil
	if st, err := prepare(&empty); err != nil || !st.v6 {
		t.Fatalf("IPv6 node port without backends: %v, v6 %v", err, st != nil && st.v6)
	}
}
