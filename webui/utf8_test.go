package webui

import (
	"strings"
	"testing"
)

// TestInvalidUTF8: a path, query, header or JSON body that is not UTF-8 is
// a 400 naming what is wrong, never a 500 (issue 36: ?frontend=%ff gave
// "internal error").
func TestInvalidUTF8(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, Token: testToken, RateLimit: -1})
	h := s.Handler()
	for _, c := range []struct {
		method, path, body string
		header             map[string]string
		field, msg         string
	}{
		{"GET", "/api/v1/flows?frontend=%ff", "", nil, "frontend", `query parameter "frontend" is not valid UTF-8`},
		{"GET", "/api/v1/flows?limit=1&%fe=1", "", nil, "query", "query parameter name is not valid UTF-8"},
		{"GET", "/api/v1/pools/%ff%fe", "", nil, "path", "URL path is not valid UTF-8"},
		{"GET", "/api/v1/nothing/%ff", "", nil, "path", "URL path is not valid UTF-8"},
		{"GET", "/api/v1/events", "", map[string]string{"Last-Event-ID": "1-\xff"}, "header Last-Event-ID", "not valid UTF-8"},
		{"GET", "/api/v1/pools", "", map[string]string{"Authorization": "Bearer \xff\xfe"}, "header Authorization", "not valid UTF-8"},
		{"POST", "/api/v1/pools", "{\"name\":\"a\xffb\",\"addresses\":[\"198.51.100.0/24\"]}", nil, "name", "UTF-8"},
		{"PUT", "/api/v1/services/x", "{\"name\":\"x\",\"ports\":[{\"port\":80,\"protocol\":\"tcp\xff\"}]}", nil, "ports[0].protocol", "UTF-8"},
	} {
		calls := m.calls
		rec := do(t, h, c.method, c.path, c.body, c.header)
		if rec.Code != 400 {
			t.Errorf("%s %q: %d %s, want 400", c.method, c.path, rec.Code, rec.Body)
			continue
		}
		e := decodeErr(t, rec)
		if e.Field != c.field || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s %q: field %q message %q, want field %q and %q", c.method, c.path, e.Field, e.Message, c.field, c.msg)
		}
		if strings.Contains(e.Value, "\xff") || m.calls != calls {
			t.Errorf("%s %q: value %q, calls %d → %d", c.method, c.path, e.Value, calls, m.calls)
		}
	}
}
