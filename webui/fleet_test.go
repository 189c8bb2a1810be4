package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb/store"
)

// TestAPIFleet: GET /api/v1/fleet lists the gateways with their revisions;
// every answer carries the store revision and, while the store is down, the
// stale header; a write then answers 503 with why; not a fleet: 404.
func TestAPIFleet(t *testing.T) {
	var down error
	gws := []store.GatewayStatus{{Name: "gw0", Revision: 7}, {Name: "gw1", Revision: 7}}
	s, err := New(Options{Manager: newFakeManager(), Token: testToken, RateLimit: -1,
		StoreHealth: func() error { return down }, StoreRevision: func() int64 { return 7 }, FleetName: "gw0",
		Fleet: func(context.Context) ([]store.GatewayStatus, error) {
			if down != nil {
				return nil, down
			}
			return gws, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, s.Handler(), http.MethodGet, "/api/v1/fleet", "", nil)
	var v fleetView
	if r.Code != http.StatusOK || json.Unmarshal(r.Body.Bytes(), &v) != nil || len(v.Gateways) != 2 || v.Revision != 7 || v.Gateway != "gw0" {
		t.Fatalf("GET /api/v1/fleet: %d %s", r.Code, r.Body)
	}
	if r.Header().Get(HeaderStoreRevision) != "7" || r.Header().Get(HeaderStale) != "" {
		t.Fatalf("headers %v", r.Header())
	}
	down = fmt.Errorf("%w: no quorum", store.ErrUnavailable)
	r = do(t, s.Handler(), http.MethodGet, "/api/v1/pools", "", nil)
	if r.Code != http.StatusOK || !strings.HasPrefix(r.Header().Get(HeaderStale), "may be stale: ") {
		t.Fatalf("read while down: %d, %s %q", r.Code, HeaderStale, r.Header().Get(HeaderStale))
	}
	if r := do(t, s.Handler(), http.MethodGet, "/api/v1/fleet", "", nil); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("fleet while down: %d %s", r.Code, r.Body)
	}
	for _, err := range []error{down, fmt.Errorf("x: %w", store.ErrStale)} {
		if ae := toAPIError(err, nil); ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "not written") {
			t.Errorf("%v → %d %q", err, ae.Status, ae.Message)
		}
	}
	plain, _ := New(Options{Manager: newFakeManager(), Token: testToken, RateLimit: -1})
	if r := do(t, plain.Handler(), http.MethodGet, "/api/v1/fleet", "", nil); r.Code != http.StatusNotFound {
		t.Fatalf("not a fleet: %d", r.Code)
	}
}
