package lb

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

func goodService() ServiceSpec {
	return ServiceSpec{
		Name:     "web",
		Ports:    []PortSpec{{Name: "http", Port: 80, Protocol: proxy.TCP, NodePort: 30080}},
		Backends: []BackendSpec{{Addr: netip.MustParseAddr("198.51.100.2"), Weight: 1}},
	}
}

func TestValidateService(t *testing.T) {
	pools := []Pool{
		pool(t, "p", true, true, "192.0.2.0/24"),
		pool(t, "q", false, false, "203.0.113.0/24", "2001:db8::/64"),
	}
	others := []ServiceSpec{{Name: "other", Ports: []PortSpec{{Port: 81, Protocol: proxy.TCP, NodePort: 30081}}}}
	for _, tc := range []struct {
		desc   string
		mod    func(s *ServiceSpec)
		field  string
		quoted string
	}{
		{"ok", func(s *ServiceSpec) {}, "", ""},
		{"ok: VIP in a pool", func(s *ServiceSpec) { s.VIPs = []netip.Addr{netip.MustParseAddr("192.0.2.9")}; s.Families = nil }, "", ""},
		{"ok: same node port, other protocol", func(s *ServiceSpec) { s.Ports[0].NodePort = 30081; s.Ports[0].Protocol = proxy.UDP }, "", ""},
		{"bad name", func(s *ServiceSpec) { s.Name = "Web!" }, "name", "Web!"},
		{"unknown pool", func(s *ServiceSpec) { s.Pool = "nope" }, "pool", "nope"},
		{"VIP outside pools", func(s *ServiceSpec) { s.VIPs = []netip.Addr{netip.MustParseAddr("198.51.100.9")}; s.Families = nil }, "vips[0]", "198.51.100.9"},
		{"VIP outside its pool", func(s *ServiceSpec) {
			s.VIPs = []netip.Addr{netip.MustParseAddr("192.0.2.9")}
			s.Families = nil
			s.Pool = "q"
		}, "vips[0]", "192.0.2.9"},
		{"buggy VIP", func(s *ServiceSpec) { s.VIPs = []netip.Addr{netip.MustParseAddr("192.0.2.255")}; s.Families = nil }, "vips[0]", "192.0.2.255"},
		{"two IPv4 VIPs", func(s *ServiceSpec) {
			s.VIPs = []netip.Addr{netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("192.0.2.10")}
			s.Families = nil
		}, "vips[1]", "192.0.2.10"},
		{"no ports", func(s *ServiceSpec) { s.Ports = nil }, "ports", ""},
		{"port 0", func(s *ServiceSpec) { s.Ports[0].Port = 0 }, "ports[0].port", ""},
		{"bad protocol", func(s *ServiceSpec) { s.Ports[0].Protocol = 1 }, "ports[0].protocol", "proto(1)"},
		{"duplicate port", func(s *ServiceSpec) {
			s.Ports = append(s.Ports, PortSpec{Port: 80, Protocol: proxy.TCP})
		}, "ports[1].port", "80/TCP"},
		{"node port outside range", func(s *ServiceSpec) { s.Ports[0].NodePort = 8080 }, "ports[0].nodePort", "8080"},
		{"node port of another service", func(s *ServiceSpec) { s.Ports[0].NodePort = 30081 }, "ports[0].nodePort", "30081/TCP"},
		{"backend unspecified", func(s *ServiceSpec) { s.Backends[0].Addr = netip.IPv4Unspecified() }, "backends[0].address", "0.0.0.0"},
		{"IPv6 backend, IPv4 service", func(s *ServiceSpec) { s.Backends[0].Addr = netip.MustParseAddr("2001:db8::2") }, "backends[0].address", "2001:db8::2"},
		{"weight", func(s *ServiceSpec) { s.Backends[0].Weight = 70000 }, "backends[0].weight", "70000"},
		{"duplicate backend", func(s *ServiceSpec) { s.Backends = append(s.Backends, s.Backends[0]) }, "backends[1].address", "198.51.100.2"},
		{"scheduler", func(s *ServiceSpec) { s.Scheduler = "random" }, "scheduler", "random"},
		{"method", func(s *ServiceSpec) { s.Method = "magic" }, "method", "magic"},
		{"dr maps no ports", func(s *ServiceSpec) {
			s.Method = proxy.DirectRouting
			s.Ports[0].NodePort = 0
			s.Ports[0].TargetPort = 8080
		}, "ports[0].targetPort", "8080"},
		{"affinity", func(s *ServiceSpec) { s.Affinity = 48 * time.Hour }, "affinity.timeout", "48h0m0s"},
		{"health type", func(s *ServiceSpec) {
			s.Health = &HealthCheck{Type: "icmp", Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
		}, "healthCheck.type", "icmp"},
		{"families twice", func(s *ServiceSpec) { s.Families = []Family{IPv4, IPv4} }, "families[1]", "IPv4"},
	} {
		s := goodService()
		NormalizeService(&s)
		tc.mod(&s)
		err := ValidateService(&s, ValidateOptions{Pools: pools, Others: others})
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.desc, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Value != tc.quoted {
			t.Errorf("%s: got %v, want field %s value %q", tc.desc, err, tc.field, tc.quoted)
			continue
		}
		if tc.quoted != "" && !strings.Contains(err.Error(), `"`+tc.quoted+`"`) {
			t.Errorf("%s: %q does not quote the value", tc.desc, err)
		}
	}
	// The index form of Others.
	s := goodService()
	NormalizeService(&s)
	s.Ports[0].NodePort = 30081
	err := ValidateService(&s, ValidateOptions{NodePorts: map[PortProto]string{{30081, proxy.TCP}: "other"}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "ports[0].nodePort" || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("NodePorts index: %v", err)
	}
	if err := ValidateService(&s, ValidateOptions{NodePorts: map[PortProto]string{{30081, proxy.TCP}: "web"}}); err != nil {
		t.Fatalf("own node port: %v", err)
	}
}

func TestBackendPortFor(t *testing.T) {
	p := PortSpec{Port: 80, TargetPort: 8080}
	for _, tc := range []struct {
		b    BackendSpec
		p    PortSpec
		want uint16
	}{
		{BackendSpec{Port: 9090}, p, 9090},
		{BackendSpec{}, p, 8080},
		{BackendSpec{}, PortSpec{Port: 80}, 80},
	} {
		if got := tc.b.PortFor(tc.p); got != tc.want {
			t.Errorf("%+v.PortFor(%+v) = %d, want %d", tc.b, tc.p, got, tc.want)
		}
	}
}

// A check probes each backend once per distinct port it serves on; no
// check, no targets.
func TestHealthTargets(t *testing.T) {
	hc := &HealthCheck{Type: "tcp", Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
	a, b := netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("198.51.100.3")
	s := ServiceSpec{Name: "web",
		Ports:    []PortSpec{{Port: 80, TargetPort: 8080}, {Port: 81, TargetPort: 8080}, {Port: 443}},
		Backends: []BackendSpec{{Addr: a}, {Addr: b, Port: 9000}}}
	if got := s.HealthTargets(); got != nil {
		t.Fatalf("no check: %v", got)
	}
	s.Health = hc
	var got []string
	for _, ht := range s.HealthTargets() {
		if ht.Service != "web" || ht.Check != *hc {
			t.Fatalf("target %+v", ht)
		}
		got = append(got, ht.Backend.String())
	}
	want := "198.51.100.2:8080 198.51.100.3:9000 198.51.100.2:443"
	if strings.Join(got, " ") != want {
		t.Fatalf("targets %v, want %s", got, want)
	}
}
