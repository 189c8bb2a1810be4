package webui

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/edgelb/edgelb/lb"
)

// TestOpenAPILimitsFromLB: every numeric bound the document advertises is
// the bound package lb enforces (one source: lb's constants), so a client
// generated from the document is refused by nothing it was told is valid.
func TestOpenAPILimitsFromLB(t *testing.T) {
	_, raw := loadOpenAPI(t)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Minimum *float64 `json:"minimum"`
					Maximum *float64 `json:"maximum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		schema, prop string
		min, max     float64
	}{
		{"BackendSpec", "weight", 0, lb.MaxWeight},
		{"BackendSpec", "port", 0, math.MaxUint16},
		{"PortSpec", "port", 1, math.MaxUint16},
		{"PortSpec", "nodePort", 0, math.MaxUint16},
		{"PortSpec", "targetPort", 0, math.MaxUint16},
		{"AdvertisementSpec", "aggregationLength", 0, lb.MaxAggregationLen},
		{"AdvertisementSpec", "localPref", 0, math.MaxUint32},
		{"HealthCheckSpec", "expectStatus", lb.MinExpectStatus, lb.MaxExpectStatus},
		{"HealthCheckSpec", "port", 0, math.MaxUint16},
	}
	for _, w := range want {
		p, ok := doc.Components.Schemas[w.schema].Properties[w.prop]
		if !ok || p.Minimum == nil || p.Maximum == nil {
			t.Errorf("%s.%s: no minimum/maximum in openapi.json", w.schema, w.prop)
			continue
		}
		if *p.Minimum != w.min || *p.Maximum != w.max {
			t.Errorf("%s.%s: openapi.json says %v..%v, lb enforces %v..%v", w.schema, w.prop, *p.Minimum, *p.Maximum, w.min, w.max)
		}
		t.Logf("%s.%s %v..%v", w.schema, w.prop, *p.Minimum, *p.Maximum)
	}
	// The bounds hold at the handler too: weight lb.MaxWeight+1 is refused.
	_, err := parseService(ServiceSpec{Name: "w", Ports: []PortSpec{{Port: 80}},
		Backends: []BackendSpec{{Address: "192.0.2.10", Weight: ptr(int64(lb.MaxWeight + 1))}}})
	if err == nil {
		t.Errorf("weight %d accepted", lb.MaxWeight+1)
	}
}

func ptr[T any](v T) *T { return &v }
