package webui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
)

// A service the dataplane refused says so in the REST status (issue 14:
// "marked failed (REST status, UI, metric, Event)").
func TestServiceStatusCarriesFailed(t *testing.T) {
	st := lb.ServiceStatus{Spec: lb.ServiceSpec{Name: "aff"}, Failed: "nft: delete chain post-m-a300000: device or resource busy"}
	b, err := json.Marshal(serviceStatusOf(st))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"failed":"nft: delete chain post-m-a300000: device or resource busy"`) {
		t.Fatalf("status JSON lacks failed: %s", b)
	}
	b, _ = json.Marshal(serviceStatusOf(lb.ServiceStatus{Spec: lb.ServiceSpec{Name: "ok"}}))
	if strings.Contains(string(b), "failed") {
		t.Fatalf("a programmed service says failed: %s", b)
	}
}
