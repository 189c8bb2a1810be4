package webui

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestHealthEndpoint(t *testing.T) {
	since := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	s, err := New(Options{Manager: newFakeManager(), Health: func() []BackendHealth {
		return []BackendHealth{{Service: "web", Backend: "198.51.100.11:8080", Healthy: false, Since: since,
			LastError: "tcp connect: refused", Checks: 9, Failures: 3, Transitions: 1}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := do(t, s.Handler(), "GET", "/api/v1/health", "", nil)
	if rec.Code != 200 {
		t.Fatalf("GET /api/v1/health: %d %s", rec.Code, rec.Body)
	}
	var got []BackendHealth
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != 1 || got[0].Healthy || got[0].Transitions != 1 {
		t.Fatalf("body %s: %+v %v", rec.Body, got, err)
	}

	// Without a source the list is empty, not null.
	s2, err := New(Options{Manager: newFakeManager()})
	if err != nil {
		t.Fatal(err)
	}
	if rec := do(t, s2.Handler(), "GET", "/api/v1/health", "", nil); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != "[]" {
		t.Fatalf("no source: %d %q", rec.Code, rec.Body)
	}

	// The OpenAPI schema has exactly the DTO's members.
	doc, _ := loadOpenAPI(t)
	sch, ok := doc.Components.Schemas["BackendHealth"]
	if !ok {
		t.Fatal("schema BackendHealth missing")
	}
	var props []string
	for p := range sch.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	if want := jsonFields(reflect.TypeOf(BackendHealth{})); strings.Join(props, ",") != strings.Join(want, ",") {
		t.Fatalf("schema BackendHealth has %v, Go type has %v", props, want)
	}
}
