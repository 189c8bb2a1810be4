package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
)

func TestPoolServiceAllocation(t *testing.T) {
	cfg, err := Parse([]byte(`
pools:
  - name: first
    addresses: [192.0.2.0/28]
    serviceAllocation: {priority: 5}
  - name: rest
    addresses: [192.0.2.16/28]
`))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Pools[0].Allocation; a == nil || a.Priority != 5 || cfg.Pools[1].Allocation != nil {
		t.Fatalf("allocations: %+v %+v", cfg.Pools[0].Allocation, cfg.Pools[1].Allocation)
	}
	for field, y := range map[string]string{
		"pools[0].serviceAllocation.namespaces":         "{namespaces: [blue]}",
		"pools[0].serviceAllocation.serviceSelectors":   "{serviceSelectors: [{matchLabels: {app: web}}]}",
		"pools[0].serviceAllocation.namespaceSelectors": "{namespaceSelectors: [{}]}",
		"pools[0].serviceAllocation.priority":           "{priority: -1}",
	} {
		_, err := Parse([]byte("pools:\n  - name: p\n    addresses: [192.0.2.0/28]\n    serviceAllocation: " + y + "\n"))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: want an error naming %s, got %v", y, field, err)
			continue
		}
		if field != "pools[0].serviceAllocation.priority" && !errors.Is(err, lb.ErrStandaloneSelectors) {
			t.Errorf("%s: %v does not wrap ErrStandaloneSelectors", y, err)
		}
		t.Logf("%s: %v", y, err)
	}
}
