package webui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb/audit"
)

const (
	readToken  = "r3ad-only-token"
	writeToken = "wr1te-token"
)

// routeKind says what a route needs.
func routeKind(method, path string) string {
	switch {
	case path == "/healthz", path == "/readyz", path == "/api/v1/openapi.json", !strings.HasPrefix(path, "/api/") &&
		!strings.HasPrefix(path, "/debug/") && path != "/metrics":
		return "open"
	case strings.HasPrefix(path, "/debug/pprof"), method != http.MethodGet:
		return "write"
	}
	return "read"
}

// TestAuthMatrix: every route the server has, on a loopback and on a
// non-loopback listen address, with no token, a wrong one, a read token
// and a write token. Reads beyond loopback need a token (401 without or
// with a wrong one); a read token cannot write (403); /healthz, /readyz,
// the page and openapi.json stay open. Served over a real socket so the
// stream (/api/v1/events) answers its status and is then closed.
func TestAuthMatrix(t *testing.T) {
	type row struct{ listen, kind, route, cred string }
	counts := map[string]int{}
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8080", "203.0.113.1:8080", ":8080"} {
		m := newFakeManager()
		m.seed(t)
		s, err := New(Options{Manager: m, RateLimit: -1, Listen: listen,
			Tokens: []Token{{Name: "ops", Secret: writeToken, Role: RoleWrite}, {Name: "grafana", Secret: readToken, Role: RoleRead}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		runDone := make(chan struct{})
		go func() { s.Run(ctx); close(runDone) }()
		ts := httptest.NewServer(s.Handler())
		loop := !ReadsNeedToken(listen, false)
		routes := s.e.Routes()
		sort.Slice(routes, func(i, j int) bool { return routes[i].Path+routes[i].Method < routes[j].Path+routes[j].Method })
		for _, r := range routes {
			if r.Method == "echo_route_not_found" || r.Method == http.MethodHead {
				continue
			}
			path := strings.NewReplacer(":name", "x").Replace(r.Path)
			if strings.HasSuffix(path, "/*") {
				path = strings.TrimSuffix(path, "*") + "app.js"
			}
			kind := routeKind(r.Method, r.Path)
			for _, cred := range []string{"none", "wrong", "read", "write"} {
				req, _ := http.NewRequest(r.Method, ts.URL+path, nil)
				if path == "/debug/pprof/profile" || path == "/debug/pprof/trace" {
					q := req.URL.Query()
					q.Set("seconds", "1")
					req.URL.RawQuery = q.Encode()
				}
				switch cred {
				case "wrong":
					req.Header.Set("Authorization", "Bearer nope")
				case "read":
					req.Header.Set("Authorization", "Bearer "+readToken)
				case "write":
					req.Header.Set("Authorization", "Bearer "+writeToken)
				}
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := http.DefaultClient.Do(req.WithContext(rctx))
				if err != nil {
					rcancel()
					t.Fatalf("%s %s %s: %v", listen, r.Method, path, err)
				}
				code := resp.StatusCode
				body := ""
				if code == 401 || code == 403 {
					b, _ := io.ReadAll(resp.Body)
					body = string(b)
				}
				resp.Body.Close()
				rcancel()
				want := "pass" // neither 401 nor 403
				switch {
				case kind == "open":
				case kind == "read" && loop:
				case kind == "read" && (cred == "none" || cred == "wrong"):
					want = "401"
				case kind == "write" && (cred == "none" || cred == "wrong"):
					want = "401"
				case kind == "write" && cred == "read":
					want = "403"
				}
				got := "pass"
				if code == 401 || code == 403 {
					got = fmt.Sprint(code)
				}
				if got != want {
					t.Errorf("%s %s %s with %s token: %d %s, want %s", listen, r.Method, path, cred, code, body, want)
				}
				if got == "401" && resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", r.Method, path)
				}
				counts[fmt.Sprintf("%-5s %-9s %-5s → %s", kind, map[bool]string{true: "loopback", false: "beyond"}[loop], cred, want)]++
				_ = row{}
			}
		}
		ts.Close()
		cancel()
		<-runDone
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("MATRIX %s: %d requests", k, counts[k])
	}
}

// TestAuthAnonymousReads: api.anonymousReads opens reads beyond loopback;
// writes still need a write token.
func TestAuthAnonymousReads(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, RateLimit: -1, Listen: "0.0.0.0:8080", AnonymousReads: true,
		Tokens: []Token{{Name: "grafana", Secret: readToken, Role: RoleRead}, {Name: "ops", Secret: writeToken, Role: RoleWrite}}})
	h := s.Handler()
	for _, p := range []string{"/api/v1/pools", "/api/v1/services", "/metrics", "/api/v1/audit"} {
		if rec := do(t, h, "GET", p, "", map[string]string{"Authorization": ""}); rec.Code != 200 {
			t.Errorf("GET %s: %d %s", p, rec.Code, rec.Body)
		}
	}
	rec := do(t, h, "DELETE", "/api/v1/pools/x", "", map[string]string{"Authorization": "Bearer " + readToken})
	if rec.Code != 403 || !strings.Contains(decodeErr(t, rec).Message, `token "grafana" may only read`) {
		t.Errorf("read token writes: %d %s", rec.Code, rec.Body)
	}
}

// TestAuthLegacyToken: api.tokenFile (Options.Token) keeps working as a
// write token named "default", and reads with it beyond loopback.
func TestAuthLegacyToken(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, RateLimit: -1, Listen: "192.0.2.1:8080", Token: testToken})
	h := s.Handler()
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	if rec := do(t, h, "GET", "/api/v1/pools", "", map[string]string{"Authorization": ""}); rec.Code != 401 ||
		!strings.Contains(decodeErr(t, rec).Message, "api.anonymousReads") {
		t.Errorf("read without token: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/api/v1/pools", "", auth); rec.Code != 200 {
		t.Errorf("read with the legacy token: %d %s", rec.Code, rec.Body)
	}
	var got audit.Actor
	m.onWrite = func(ctx context.Context) { got, _ = audit.ActorFrom(ctx) }
	if rec := do(t, h, "DELETE", "/api/v1/pools/v6", "", auth); rec.Code != 204 {
		t.Fatalf("write with the legacy token: %d %s", rec.Code, rec.Body)
	}
	if got.Identity != LegacyTokenName || got.Source != "rest" || !got.Client.IsValid() {
		t.Errorf("actor handed to the writer: %+v", got)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for listen, want := range map[string]bool{"127.0.0.1:80": true, "127.1.2.3:80": true, "[::1]:80": true,
		"localhost:80": true, "0.0.0.0:80": false, "[::]:80": false, ":80": false, "192.0.2.1:80": false,
		"gw.example:80": false, "[::ffff:127.0.0.1]:80": true} {
		if got := loopbackOnly(listen); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", listen, got, want)
		}
	}
}
