package webui

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAPIPoolServiceAllocation: a pool's serviceAllocation goes through
// REST both ways; the one validator's refusals name the field (400).
func TestAPIPoolServiceAllocation(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, Token: testToken, RateLimit: -1})
	h := s.Handler()
	body := `{"name":"blue","addresses":["198.51.100.0/25"],"serviceAllocation":{"priority":5,"namespaces":["blue"],` +
		`"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"In","values":["web"]}]}]}}`
	rec := do(t, h, "POST", "/api/v1/pools", body, nil)
	if rec.Code != 201 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "GET", "/api/v1/pools/blue", "", nil)
	var ps PoolStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &ps); err != nil {
		t.Fatal(err)
	}
	a := ps.Spec.ServiceAllocation
	if a == nil || a.Priority != 5 || len(a.Namespaces) != 1 || a.ServiceSelectors[0].MatchExpressions[0].Values[0] != "web" {
		t.Fatalf("read back: %s", rec.Body)
	}
	for _, tc := range []struct{ body, field, message string }{
		{`{"name":"x","addresses":["198.51.100.128/26"],"serviceAllocation":{"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"Equals"}]}]}}`,
			"serviceAllocation.serviceSelectors[0].matchExpressions[0].operator", "want In, NotIn, Exists or DoesNotExist"},
		{`{"name":"x","addresses":["198.51.100.128/26"],"serviceAllocation":{"priority":-2}}`,
			"serviceAllocation.priority", "out of range"},
		{`{"name":"x","addresses":["198.51.100.128/26"],"serviceAllocation":{"namespaces":["Not_A_Name"]}}`,
			"serviceAllocation.namespaces[0]", "not a namespace name"},
		{`{"name":"x","addresses":["198.51.100.128/26"],"serviceAllocation":{"priorty":1}}`,
			"serviceAllocation.priorty", "unknown"},
	} {
		rec := do(t, h, "POST", "/api/v1/pools", tc.body, nil)
		if rec.Code != 400 {
			t.Errorf("%s: %d %s", tc.body, rec.Code, rec.Body)
			continue
		}
		e := decodeErr(t, rec)
		if e.Field != tc.field || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%s: field %q message %q, want %q / %q", tc.body, e.Field, e.Message, tc.field, tc.message)
		}
	}
}
