package webui

import (
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/audit"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) (openAPIDoc, []byte) {
	t.Helper()
	raw, err := assets.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	return doc, raw
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}

// TestOpenAPIMatchesRoutes: every route echo serves is in the document,
// and every operation in the document is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	s, err := New(Options{Manager: newFakeManager()})
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([a-zA-Z]+)`)
	served := map[string]bool{}
	for _, r := range s.e.Routes() {
		key := strings.ToLower(r.Method) + " " + param.ReplaceAllString(r.Path, "{$1}")
		served[key] = true
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for m := range ops {
			if httpMethods[m] {
				documented[m+" "+path] = true
			}
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("route %s is served but not in openapi.json", k)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("operation %s is in openapi.json but not served", k)
		}
	}
	t.Logf("%d routes, all documented", len(served))
}

// TestOpenAPIRefsResolve: every $ref points at a defined component.
func TestOpenAPIRefsResolve(t *testing.T) {
	doc, raw := loadOpenAPI(t)
	for _, m := range regexp.MustCompile(`"\$ref":\s*"#/components/(schemas|responses)/([A-Za-z]+)"`).FindAllStringSubmatch(string(raw), -1) {
		ok := false
		if m[1] == "schemas" {
			_, ok = doc.Components.Schemas[m[2]]
		} else {
			_, ok = doc.Components.Responses[m[2]]
		}
		if !ok {
			t.Errorf("dangling $ref %s/%s", m[1], m[2])
		}
	}
}

// jsonFields lists the JSON member names of a struct (embedded structs inlined).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPISchemasMatchDTOs: the document's schemas have exactly the
// members the Go DTOs read and write, so the two cannot drift apart.
func TestOpenAPISchemasMatchDTOs(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	for name, v := range map[string]any{
		"Error": APIError{}, "PoolSpec": PoolSpec{}, "AdvertisementSpec": AdvertisementSpec{}, "PoolStatus": PoolStatus{},
		"ServiceSpec": ServiceSpec{}, "PortSpec": PortSpec{}, "BackendSpec": BackendSpec{}, "HealthCheckSpec": HealthCheckSpec{},
		"ServiceStatus": ServiceStatus{}, "Flow": Flow{}, "FlowList": FlowList{}, "VIPStats": VIPStats{},
		"BackendStats": BackendStats{}, "AnnounceStatus": announce.Status{}, "PeerState": announce.PeerState{},
		"BFDState": announce.BFDState{}, "Snapshot": Snapshot{}, "Delta": Delta{}, "AuditList": AuditList{}, "AuditEntry": audit.Entry{},
	} {
		sch, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var props []string
		for p := range sch.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		want := jsonFields(reflect.TypeOf(v))
		if strings.Join(props, ",") != strings.Join(want, ",") {
			t.Errorf("schema %s has %v, Go type has %v", name, props, want)
		}
		for _, r := range sch.Required {
			if _, ok := sch.Properties[r]; !ok {
				t.Errorf("schema %s requires unknown %q", name, r)
			}
		}
	}
}
