package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
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

// unavailableManager is a fleet gateway without quorum: every write fails
// with the store's ErrUnavailable, as the engine answers then (a DELETE of
// a name its possibly stale view lacks included: lb/engine fleet.go).
type unavailableManager struct{ *fakeManager }

var errNoQuorum = fmt.Errorf("delete: %w (http://10.77.0.11:2379): etcdserver: no leader", store.ErrUnavailable)

func (unavailableManager) CreatePool(context.Context, lb.Pool) (lb.PoolStatus, error) {
	return lb.PoolStatus{}, errNoQuorum
}
func (unavailableManager) UpdatePool(context.Context, lb.Pool) (lb.PoolStatus, error) {
	return lb.PoolStatus{}, errNoQuorum
}
func (unavailableManager) DeletePool(context.Context, string) error { return errNoQuorum }
func (unavailableManager) PutService(context.Context, lb.ServiceSpec) (lb.ServiceStatus, bool, error) {
	return lb.ServiceStatus{}, false, errNoQuorum
}
func (unavailableManager) DeleteService(context.Context, string) error { return errNoQuorum }

// TestAPIWritesWithoutQuorum (issue 35): every write, DELETE included,
// answers 503 with why while the fleet's store has no quorum; reads answer
// from the gateway's view with X-Edgelb-Stale.
func TestAPIWritesWithoutQuorum(t *testing.T) {
	s, err := New(Options{Manager: unavailableManager{newFakeManager()}, Token: testToken, RateLimit: -1,
		StoreHealth: func() error { return errNoQuorum }, StoreRevision: func() int64 { return 7 }})
	if err != nil {
		t.Fatal(err)
	}
	pool := `{"name":"p","addresses":["192.0.2.0/28"]}`
	service := `{"name":"web","pool":"p","ports":[{"port":80}],"backends":[{"address":"198.51.100.1","port":8080,"weight":1}]}`
	for _, w := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/pools", pool},
		{http.MethodPut, "/api/v1/pools/p", pool},
		{http.MethodDelete, "/api/v1/pools/p", ""},
		{http.MethodPut, "/api/v1/services/web", service},
		{http.MethodDelete, "/api/v1/services/web", ""},
		{http.MethodDelete, "/api/v1/services/nobody-knows", ""},
	} {
		r := do(t, s.Handler(), w.method, w.path, w.body, nil)
		if r.Code != http.StatusServiceUnavailable || !strings.Contains(r.Body.String(), "not written: ") ||
			!strings.Contains(r.Body.String(), "unavailable") {
			t.Errorf("%s %s without quorum: %d %s, want 503 saying why", w.method, w.path, r.Code, r.Body)
		}
	}
	r := do(t, s.Handler(), http.MethodGet, "/api/v1/services", "", nil)
	if r.Code != http.StatusOK || !strings.HasPrefix(r.Header().Get(HeaderStale), "may be stale: ") {
		t.Errorf("read without quorum: %d, %s %q", r.Code, HeaderStale, r.Header().Get(HeaderStale))
	}
}
