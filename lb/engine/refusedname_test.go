package engine

import (
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestRefusedByRenderedName: the effects loop reports refusals by the
// rendered proxy.Service names ("b/81-TCP", "b/81-TCP/nodeport"); the
// status of service "b" shows them (it showed nothing when the names were
// looked up as service names).
func TestRefusedByRenderedName(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	pool := mustPool(t, "p", true, "192.0.2.0/28")
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{svc("a", 80, "198.51.100.1"), svc("b", 81, "198.51.100.2")}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetRefused(ctx, map[string]string{"b/81-TCP/nodeport": "node port refused", "b/81-TCP": "vip refused"}); err != nil {
		t.Fatal(err)
	}
	a, _ := e.Service(ctx, "a")
	b, _ := e.Service(ctx, "b")
	if a.Failed != "" || b.Failed != "vip refused; node port refused" {
		t.Fatalf("failed: a %q, b %q", a.Failed, b.Failed)
	}
}
