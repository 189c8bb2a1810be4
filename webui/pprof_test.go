package webui

import (
	"net/http"
	"strings"
	"testing"
)

// The profiles answer with the token and only with it.
func TestPprofNeedsToken(t *testing.T) {
	s, err := New(Options{Manager: newFakeManager(), Token: testToken, RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if rec := do(t, h, http.MethodGet, path, "", map[string]string{"Authorization": ""}); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, rec.Code)
		}
		rec := do(t, h, http.MethodGet, path, "", nil)
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s with the token: %d, %d bytes", path, rec.Code, rec.Body.Len())
		}
	}
	if rec := do(t, h, http.MethodGet, "/debug/pprof/goroutine?debug=1", "", nil); !strings.Contains(rec.Body.String(), "goroutine profile:") {
		t.Errorf("goroutine profile: %.200s", rec.Body.String())
	}
}
