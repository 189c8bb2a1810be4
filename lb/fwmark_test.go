package lb

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestFWMarkService: a service is either a VIP with ports or a firewall
// mark; a fwmark service with a VIP, families, a pool, a sharing key or
// ports is refused naming the field, as is method nat (its masquerade
// would change the mark), a mark out of range, and a check with no port
// to probe. It renders one proxy.Service per backend family.
func TestFWMarkService(t *testing.T) {
	w := int64(1)
	good := ServiceInput{Name: "marked", FWMark: 1, Method: "nat-nosnat", Scheduler: "rr",
		Backends: []BackendInput{{Address: "192.0.2.10", Weight: &w}, {Address: "192.0.2.11", Port: 8080}, {Address: "2001:db8::10"}}}
	s, err := ParseService(&good, "", ValidateOptions{})
	if err != nil || s.FWMark != 1 || len(s.Families) != 0 || len(s.VIPs) != 0 {
		t.Fatalf("good fwmark service: %+v, %v", s, err)
	}
	if in := InputOf(s); in.FWMark != 1 {
		t.Errorf("InputOf lost the mark: %+v", in)
	}
	for _, tc := range []struct {
		field string
		edit  func(*ServiceInput)
	}{
		{"vip", func(in *ServiceInput) { in.VIP = "198.51.100.1" }},
		{"families", func(in *ServiceInput) { in.Families = []string{"IPv6"} }},
		{"pool", func(in *ServiceInput) { in.Pool = "p" }},
		{"sharingKey", func(in *ServiceInput) { in.SharingKey = "k" }},
		{"ports", func(in *ServiceInput) { in.Ports = []PortInput{{Port: 80}} }},
		{"method", func(in *ServiceInput) { in.Method = "nat" }},
		{"fwmark", func(in *ServiceInput) { in.FWMark = 1 << 32 }},
		{"healthCheck.port", func(in *ServiceInput) { in.HealthCheck = &HealthCheckInput{Type: "tcp"} }},
	} {
		in := good
		tc.edit(&in)
		_, err := ParseService(&in, "", ValidateOptions{SingleVIP: true})
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", tc.field, err, tc.field)
		}
	}
	in := good
	in.HealthCheck = &HealthCheckInput{Type: "tcp", Port: 80}
	if _, err := ParseService(&in, "", ValidateOptions{}); err != nil {
		t.Errorf("a check with its own port: %v", err)
	}
	ds := DesiredService{Name: "marked", FWMark: 1, Method: proxy.NATNoSNAT, Ports: []DesiredPort{{Name: "marked/fwmark-1",
		Backends: []proxy.Backend{{Addr: ap(s.Backends[0]), Weight: 1}, {Addr: ap(s.Backends[2]), Weight: 1}}}}}
	out, served := ds.Render(nil)
	if len(out) != 2 || len(served) != 0 || out[0].Key().String() != "fwmark:1/IPv4" || out[1].Key().String() != "fwmark:1/IPv6" ||
		len(out[0].Backends) != 1 || len(out[1].Backends) != 1 {
		t.Errorf("rendered %+v, served %v", out, served)
	}
}

func ap(b BackendSpec) netip.AddrPort { return netip.AddrPortFrom(b.Addr, b.Port) }
