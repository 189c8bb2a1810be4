package webui

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type apiCase struct {
	name    string
	method  string
	path    string
	body    string
	header  map[string]string // added to (or, with "", removed from) the defaults
	status  int
	field   string // expected "field" of the error
	message string // substring of "error"
}

// do sends a request straight into the handler (no network) with a given
// peer address, so tests can control what the rate limiter sees.
func do(t *testing.T, h http.Handler, method, path, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	req.RemoteAddr = "192.0.2.77:40000"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeErr(t *testing.T, rec *httptest.ResponseRecorder) APIError {
	t.Helper()
	var e APIError
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, body %s", ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Message == "" {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return e
}

// TestAPIRefusals sends every kind of bad request and checks the status,
// the field the error names, the message, and that the store is unchanged.
func TestAPIRefusals(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, err := New(Options{Manager: m, Token: testToken, RateLimit: -1, BodyLimit: 2048})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	pool := func(extra string) string {
		return `{"name":"extra","addresses":["198.51.100.0/24"],"autoAssign":true` + extra + `}`
	}
	big := `{"name":"big","addresses":["` + strings.Repeat("198.51.100.1,", 300) + `"]}`
	cases := []apiCase{
		{name: "malformed JSON", method: "POST", path: "/api/v1/pools", body: `{"name": "x",`,
			status: 400, field: "body", message: "malformed JSON"},
		{name: "not JSON at all", method: "POST", path: "/api/v1/pools", body: `name=x`,
			status: 400, field: "body", message: "malformed JSON at byte 1"},
		{name: "empty body", method: "POST", path: "/api/v1/pools", body: ` `, status: 400, field: "body", message: "empty"},
		{name: "trailing data", method: "POST", path: "/api/v1/pools", body: pool("") + `{}`,
			status: 400, field: "body", message: "malformed JSON"},
		{name: "unknown field", method: "POST", path: "/api/v1/pools", body: pool(`,"colour":"red"`),
			status: 400, field: "colour", message: "unknown field"},
		{name: "unknown nested field", method: "POST", path: "/api/v1/pools", body: pool(`,"advertisement":{"localpref":5}`),
			status: 400, field: "advertisement.localpref", message: "unknown field"},
		{name: "field names are case-sensitive", method: "POST", path: "/api/v1/pools",
			body: `{"Name":"x","addresses":["198.51.100.0/24"]}`, status: 400, field: "Name", message: "unknown field"},
		{name: "duplicate key", method: "POST", path: "/api/v1/pools",
			body: `{"name":"a","name":"b","addresses":["198.51.100.0/24"]}`, status: 400, field: "name", message: "duplicate"},
		{name: "wrong type", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":"198.51.100.0/24"}`,
			status: 400, field: "addresses", message: "want an array"},
		{name: "bad CIDR", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["198.51.100.0/33"]}`,
			status: 400, field: "addresses[0]", message: `invalid CIDR "198.51.100.0/33"`},
		{name: "CIDR with host bits", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["203.0.113.0/24","198.51.100.1/24"]}`,
			status: 400, field: "addresses[1]", message: "host bits set"},
		{name: "reversed range", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["198.51.100.20-198.51.100.10"]}`,
			status: 400, field: "addresses[0]", message: "before the first"},
		{name: "mixed family range", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["198.51.100.1-2001:db8::1"]}`,
			status: 400, field: "addresses[0]", message: "mixes IPv4 and IPv6"},
		{name: "no addresses", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":[]}`,
			status: 400, field: "addresses", message: "at least one"},
		{name: "overlap inside the pool", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["198.51.100.0/24","198.51.100.5"]}`,
			status: 400, field: "addresses[1]", message: "overlaps"},
		{name: "bad name", method: "POST", path: "/api/v1/pools", body: `{"name":"Bad_Name","addresses":["198.51.100.0/24"]}`,
			status: 400, field: "name", message: "lower-case"},
		{name: "bad community", method: "POST", path: "/api/v1/pools", body: pool(`,"advertisement":{"communities":["65000:70000"]}`),
			status: 400, field: "advertisement.communities[0]", message: "two 16-bit numbers"},
		{name: "overlap with another pool", method: "POST", path: "/api/v1/pools", body: `{"name":"x","addresses":["192.0.2.128/25"]}`,
			status: 409, field: "addresses", message: `overlaps range "192.0.2.0/24" of pool "default"`},
		{name: "name taken", method: "POST", path: "/api/v1/pools", body: `{"name":"default","addresses":["198.51.100.0/24"]}`,
			status: 409, field: "name", message: "already exists"},
		{name: "shrink over an address in use", method: "PUT", path: "/api/v1/pools/default", body: `{"name":"default","addresses":["192.0.2.128/25"]}`,
			status: 409, field: "addresses", message: "192.0.2.10 is assigned"},
		{name: "rename through PUT", method: "PUT", path: "/api/v1/pools/default", body: `{"name":"other","addresses":["192.0.2.0/24"]}`,
			status: 400, field: "name", message: "must equal the name in the URL"},
		{name: "update unknown pool", method: "PUT", path: "/api/v1/pools/nope", body: `{"name":"nope","addresses":["198.51.100.0/24"]}`,
			status: 404, message: "not found"},
		{name: "delete a pool in use", method: "DELETE", path: "/api/v1/pools/default", status: 409, field: "name", message: "still has address 192.0.2.10"},
		{name: "delete unknown pool", method: "DELETE", path: "/api/v1/pools/nope", status: 404, message: "not found"},
		{name: "missing token", method: "POST", path: "/api/v1/pools", body: pool(""), header: map[string]string{"Authorization": ""},
			status: 401, message: "missing bearer token"},
		{name: "wrong token", method: "POST", path: "/api/v1/pools", body: pool(""), header: map[string]string{"Authorization": "Bearer guess"},
			status: 401, message: "invalid bearer token"},
		{name: "token with another scheme", method: "DELETE", path: "/api/v1/pools/v6", header: map[string]string{"Authorization": "Basic " + testToken},
			status: 401, message: "missing bearer token"},
		{name: "oversized body", method: "POST", path: "/api/v1/pools", body: big, status: 413, message: "larger than the limit"},
		{name: "wrong content type", method: "POST", path: "/api/v1/pools", body: pool(""), header: map[string]string{"Content-Type": "text/plain"},
			status: 415, message: "application/json"},
		{name: "cross-site request", method: "POST", path: "/api/v1/pools", body: pool(""), header: map[string]string{"Sec-Fetch-Site": "cross-site"},
			status: 403, message: "cross-origin"},
		{name: "foreign Origin", method: "DELETE", path: "/api/v1/pools/v6", header: map[string]string{"Origin": "https://evil.example"},
			status: 403, message: "cross-origin"},
		{name: "service: port out of range", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":70000}],"backends":[]}`, status: 400, field: "ports[0].port", message: "out of range 1-65535"},
		{name: "service: fractional port", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80.5}],"backends":[]}`, status: 400, field: "ports[0].port", message: "want an integer"},
		{name: "service: bad protocol", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80,"protocol":"SCTP"}],"backends":[]}`, status: 400, field: "ports[0].protocol", message: "want TCP or UDP"},
		{name: "service: duplicate port", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80},{"port":80,"protocol":"tcp"}]}`, status: 400, field: "ports[1].port", message: "listed twice (also ports[0])"},
		{name: "service: unknown nested field", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80,"colour":1}]}`, status: 400, field: "ports[0].colour", message: "unknown field"},
		{name: "service: bad backend address", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80}],"backends":[{"address":"198.51.100.300"}]}`, status: 400, field: "backends[0].address", message: "not an IP address"},
		{name: "service: bad weight", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80}],"backends":[{"address":"198.51.100.3","weight":-1}]}`, status: 400, field: "backends[0].weight"},
		{name: "service: bad duration", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80}],"affinityTimeout":"forever"}`, status: 400, field: "affinityTimeout", message: "duration"},
		{name: "service: two VIPs of one family", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","vips":["192.0.2.20","192.0.2.21"],"ports":[{"port":80}]}`, status: 400, field: "vips[1]", message: "one VIP per family"},
		{name: "service: unknown scheduler", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80}],"scheduler":"fastest"}`, status: 400, field: "scheduler", message: "want one of rr"},
		{name: "service: no ports", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[]}`, status: 400, field: "ports", message: "at least one port"},
		{name: "service: VIP outside every pool", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","vips":["203.0.113.9"],"ports":[{"port":80}]}`, status: 400, field: "vips[0]", message: "not in any pool"},
		{name: "service: VIP taken", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","vips":["192.0.2.10"],"ports":[{"port":80}]}`, status: 409, field: "vips[0]", message: `assigned to service "web"`},
		{name: "service: health check type", method: "PUT", path: "/api/v1/services/api",
			body: `{"name":"api","ports":[{"port":80}],"healthCheck":{"type":"icmp"}}`, status: 400, field: "healthCheck.type"},
		{name: "delete unknown service", method: "DELETE", path: "/api/v1/services/nope", status: 404},
		{name: "unknown route", method: "GET", path: "/api/v1/nope", status: 404, message: "no such endpoint: GET /api/v1/nope"},
		{name: "unknown route with a write method", method: "POST", path: "/api/v1/nope", body: "{}", status: 404, message: "no such endpoint"},
		{name: "method not allowed", method: "PATCH", path: "/api/v1/pools/default", body: "{}", status: 405, message: "PATCH is not allowed"},
		{name: "flows: bad limit", method: "GET", path: "/api/v1/flows?limit=-3", status: 400, field: "limit"},
		{name: "flows: bad frontend", method: "GET", path: "/api/v1/flows?frontend=nope", status: 400, field: "frontend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := m.dump()
			rec := do(t, h, tc.method, tc.path, tc.body, tc.header)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status < 300 {
				return
			}
			e := decodeErr(t, rec)
			if e.Field != tc.field {
				t.Errorf("field %q, want %q (error %q)", e.Field, tc.field, e.Message)
			}
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("error %q does not contain %q", e.Message, tc.message)
			}
			if tc.status == 401 && rec.Header().Get("WWW-Authenticate") != `Bearer realm="edgelb"` {
				t.Errorf("401 without WWW-Authenticate: %q", rec.Header().Get("WWW-Authenticate"))
			}
			if after := m.dump(); after != before {
				t.Errorf("store changed by a refused request:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			t.Logf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
		})
	}

	// Chunked bodies have no Content-Length: the reader enforces the limit.
	req := httptest.NewRequest("POST", "/api/v1/pools", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 413 {
		t.Fatalf("chunked oversized body: %d %s", rec.Code, rec.Body)
	}
}

func TestAPINoTokenConfigured(t *testing.T) {
	m := newFakeManager()
	s, _ := New(Options{Manager: m})
	rec := do(t, s.Handler(), "POST", "/api/v1/pools", `{"name":"x","addresses":["198.51.100.0/24"]}`, nil)
	if rec.Code != 403 || !strings.Contains(decodeErr(t, rec).Message, "no API token with role write configured") || m.calls != 0 {
		t.Fatalf("%d %s calls=%d", rec.Code, rec.Body, m.calls)
	}
}

func TestAPIPoolLifecycle(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, Token: testToken, RateLimit: -1})
	h := s.Handler()
	rec := do(t, h, "POST", "/api/v1/pools", `{"name":"extra","addresses":["198.51.100.0/25", "198.51.100.200 - 198.51.100.210"],"autoAssign":true}`, nil)
	if rec.Code != 201 || rec.Header().Get("Location") != "/api/v1/pools/extra" {
		t.Fatalf("create: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	var ps PoolStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Size != 128+11 || ps.Used != 0 || strings.Join(ps.Spec.Addresses, ",") != "198.51.100.0/25,198.51.100.200-198.51.100.210" {
		t.Fatalf("created %+v", ps)
	}
	rec = do(t, h, "GET", "/api/v1/pools/default", "", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"used":1`) || !strings.Contains(rec.Body.String(), `"size":256`) {
		t.Fatalf("get default: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "PUT", "/api/v1/pools/extra", `{"addresses":["198.51.100.0/24"],"name":"extra","advertisement":{"communities":["65000:100","no-export"],"localPref":200}}`, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"localPref":200`) {
		t.Fatalf("update: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "GET", "/api/v1/pools", "", nil)
	var list []PoolStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list) != 3 || list[1].Spec.Name != "extra" {
		t.Fatalf("list: %s %v", rec.Body, err)
	}
	if rec = do(t, h, "DELETE", "/api/v1/pools/extra", "", nil); rec.Code != 204 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	if rec = do(t, h, "GET", "/api/v1/pools/extra", "", nil); rec.Code != 404 {
		t.Fatalf("get deleted: %d", rec.Code)
	}
	// Reads need no token.
	if rec = do(t, h, "GET", "/api/v1/pools", "", map[string]string{"Authorization": ""}); rec.Code != 200 {
		t.Fatalf("read without token: %d", rec.Code)
	}
}

func TestAPIServiceLifecycle(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, _ := New(Options{Manager: m, Token: testToken, RateLimit: -1})
	h := s.Handler()
	body := `{"name":"dns","pool":"default","ports":[{"name":"dns","port":53,"protocol":"UDP"},{"port":53}],
		"families":["IPv4","IPv6"],"backends":[{"address":"198.51.100.5","port":5353,"weight":3},{"address":"2001:db8:1::5"}],
		"scheduler":"sh","affinity":{"type":"ClientIP","timeout":"30m"},"method":"nat-nosnat",
		"healthCheck":{"type":"tcp","interval":"5s","timeout":"1s","rise":2,"fall":3}}`
	rec := do(t, h, "PUT", "/api/v1/services/dns", body, nil)
	if rec.Code != 201 || rec.Header().Get("Location") != "/api/v1/services/dns" {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var st ServiceStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Assigned) != 1 || st.Assigned[0] != "192.0.2.0" || st.Spec.Affinity == nil || st.Spec.Affinity.Timeout != "30m0s" ||
		st.Spec.Ports[1].Protocol != "TCP" || *st.Spec.Backends[1].Weight != 1 || st.Spec.HealthCheck.Interval != "5s" {
		t.Fatalf("created %+v", st)
	}
	if rec = do(t, h, "PUT", "/api/v1/services/dns", body, nil); rec.Code != 200 {
		t.Fatalf("replace: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "GET", "/api/v1/services", "", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"assigned":["192.0.2.10"]`) {
		t.Fatalf("list: %s", rec.Body)
	}
	if rec = do(t, h, "DELETE", "/api/v1/services/dns", "", nil); rec.Code != 204 {
		t.Fatalf("delete: %d", rec.Code)
	}
	if rec = do(t, h, "GET", "/api/v1/services/dns", "", nil); rec.Code != 404 {
		t.Fatalf("get deleted: %d", rec.Code)
	}
}

func TestAPIOpsEndpoints(t *testing.T) {
	m := newFakeManager()
	reg := prometheus.NewRegistry()
	ready := false
	s, err := New(Options{Manager: m, Registerer: reg, Gatherer: reg, Ready: func(ctx contextT) error {
		if !ready {
			return errString("dataplane not converged")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if rec := do(t, h, "GET", "/healthz", "", nil); rec.Code != 200 {
		t.Fatalf("healthz %d", rec.Code)
	}
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != 503 || !strings.Contains(rec.Body.String(), "dataplane not converged") {
		t.Fatalf("readyz not ready: %d %s", rec.Code, rec.Body)
	}
	ready = true
	if rec := do(t, h, "GET", "/readyz", "", nil); rec.Code != 200 {
		t.Fatalf("readyz %d", rec.Code)
	}
	rec := do(t, h, "GET", "/metrics", "", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "edgelb_webui_stream_clients 0") {
		t.Fatalf("metrics: %d %s", rec.Code, rec.Body)
	}
	rec = do(t, h, "GET", "/", "", nil)
	if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("page: %d %v", rec.Code, rec.Header())
	}
	for _, p := range []string{"/api/v1/flows", "/api/v1/stats", "/api/v1/announce", "/api/v1/openapi.json"} {
		if rec := do(t, h, "GET", p, "", nil); rec.Code != 200 || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
}

// TestAPIRateLimitUsesPeerAddress: the limit follows the TCP peer; a
// client cannot escape it (or frame someone else) with X-Forwarded-For.
func TestAPIRateLimitUsesPeerAddress(t *testing.T) {
	// One token per 1,000 s: none comes back while the test runs, however
	// slowly (at 1/s a second's stall between the requests refilled one and
	// let the fourth through).
	s, _ := New(Options{Manager: newFakeManager(), RateLimit: 0.001, RateBurst: 3})
	h := s.Handler()
	get := func(peer, xff string) int {
		req := httptest.NewRequest("GET", "/api/v1/pools", nil)
		req.RemoteAddr = peer
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
			req.Header.Set("X-Real-IP", xff)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == 429 && rec.Header().Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		return rec.Code
	}
	for i := 0; i < 3; i++ {
		if c := get("198.51.100.9:1000", ""); c != 200 {
			t.Fatalf("request %d within burst: %d", i, c)
		}
	}
	if c := get("198.51.100.9:1001", "203.0.113.1"); c != 429 {
		t.Fatalf("X-Forwarded-For escaped the limit: %d", c)
	}
	if c := get("198.51.100.10:1000", "198.51.100.9"); c != 200 {
		t.Fatalf("another peer was limited: %d", c)
	}
	// IPv6 peers share a bucket per /64.
	for i := 0; i < 3; i++ {
		get("[2001:db8:1:2::1]:1000", "")
	}
	if c := get("[2001:db8:1:2::99]:1000", ""); c != 429 {
		t.Fatalf("same /64 not limited: %d", c)
	}
}

func TestLimiterRefillsAndForgets(t *testing.T) {
	l := newLimiter(10, 2)
	k := peerKey("192.0.2.1:5")
	t0 := time.Unix(1000, 0)
	l.allow(k, t0)
	l.allow(k, t0)
	if ok, wait := l.allow(k, t0); ok || wait != 100*time.Millisecond {
		t.Fatalf("empty bucket: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := l.allow(k, t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("no refill")
	}
	l.allow(k, t0.Add(2*time.Minute))
	if len(l.buckets) != 1 {
		t.Fatalf("buckets %d", len(l.buckets))
	}
	l.allow(peerKey("192.0.2.2:5"), t0.Add(4*time.Minute))
	if len(l.buckets) != 1 {
		t.Fatalf("idle bucket not swept: %d", len(l.buckets))
	}
}

// TestAPIOverHTTP runs the same kind of request over a real socket.
func TestAPIOverHTTP(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	_, ts := startServer(t, m, nil)
	req, _ := http.NewRequest("POST", ts.URL+"/api/v1/pools", bytes.NewReader([]byte(`{"name":"x","addresses":["192.0.2.0/26"]}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Origin", ts.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 409 || !strings.Contains(string(b), `"field":"addresses"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
