package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestRenderSteps (issue 14) walks one service through the states both
// modes hand the shared renderer and checks every rendering by its keys:
// no service mixes families, no two services share a key, and a dual-stack
// node port is one service per family (the cluster-mode bug: one node-port
// service with IPv4 and IPv6 backends, which nftables refuses).
func TestRenderSteps(t *testing.T) {
	a := netip.MustParseAddr
	b := func(s string, w uint32) proxy.Backend {
		return proxy.Backend{Addr: netip.MustParseAddrPort(s), Weight: w}
	}
	drain := func(s string) proxy.Backend { return proxy.Backend{Addr: netip.MustParseAddrPort(s), Draining: true} }
	dual := []proxy.Backend{b("10.0.0.1:80", 1), b("[fd00::1]:80", 1), b("10.0.0.2:80", 2)}
	for _, step := range []struct {
		name string
		ds   DesiredService
		want []string // "key backends", in order
		vips []string // served
	}{
		{"dual-stack NodePort Service (no VIP)",
			DesiredService{Name: "ns/np", Ports: []DesiredPort{{Name: "ns/np/http", Port: 80, Protocol: proxy.TCP, NodePort: 30080, Backends: dual}}},
			[]string{"nodeport:30080/TCP 10.0.0.1:80,10.0.0.2:80", "nodeport6:30080/TCP [fd00::1]:80"}, nil},
		{"dual-stack LoadBalancer with node ports",
			DesiredService{Name: "ns/lb", VIPs: []netip.Addr{a("192.0.2.1"), a("2001:db8::1")},
				Ports: []DesiredPort{{Name: "ns/lb", Port: 80, Protocol: proxy.TCP, NodePort: 30081, Backends: dual}}},
			[]string{"192.0.2.1:80/TCP 10.0.0.1:80,10.0.0.2:80", "[2001:db8::1]:80/TCP [fd00::1]:80",
				"nodeport:30081/TCP 10.0.0.1:80,10.0.0.2:80", "nodeport6:30081/TCP [fd00::1]:80"},
			[]string{"192.0.2.1", "2001:db8::1"}},
		{"IPv6 endpoints gone: the IPv6 VIP stays with none, the IPv6 node port goes",
			DesiredService{Name: "ns/lb", VIPs: []netip.Addr{a("192.0.2.1"), a("2001:db8::1")},
				Ports: []DesiredPort{{Name: "ns/lb", Port: 80, Protocol: proxy.TCP, NodePort: 30081, Backends: dual[:1]}}},
			[]string{"192.0.2.1:80/TCP 10.0.0.1:80", "[2001:db8::1]:80/TCP -", "nodeport:30081/TCP 10.0.0.1:80"},
			[]string{"192.0.2.1", "2001:db8::1"}},
		{"no backends at all: the node port listens in IPv4",
			DesiredService{Name: "wait", Ports: []DesiredPort{{Name: "wait/443-TCP", Port: 443, Protocol: proxy.TCP, NodePort: 30443}}},
			[]string{"nodeport:30443/TCP -"}, nil},
		{"ActiveOnly (Local): only the families with a local endpoint taking connections",
			DesiredService{Name: "ns/loc", VIPs: []netip.Addr{a("192.0.2.2"), a("2001:db8::2")}, ActiveOnly: true,
				Ports: []DesiredPort{{Name: "ns/loc", Port: 80, Protocol: proxy.TCP, NodePort: 30082,
					Backends: []proxy.Backend{drain("10.0.0.1:80"), b("[fd00::1]:80", 1)}}}},
			[]string{"[2001:db8::2]:80/TCP [fd00::1]:80", "nodeport6:30082/TCP [fd00::1]:80"}, []string{"2001:db8::2"}},
		{"ActiveOnly with no endpoint: nothing, not even the node port",
			DesiredService{Name: "ns/loc", VIPs: []netip.Addr{a("192.0.2.2")}, ActiveOnly: true,
				Ports: []DesiredPort{{Name: "ns/loc", Port: 80, Protocol: proxy.TCP, NodePort: 30082}}},
			nil, nil},
		{"two ports, one VIP each family, UDP without node port",
			DesiredService{Name: "web", VIPs: []netip.Addr{a("192.0.2.3")},
				Ports: []DesiredPort{{Name: "web/http", Port: 80, Protocol: proxy.TCP, Backends: dual},
					{Name: "web/53-UDP", Port: 53, Protocol: proxy.UDP, Backends: dual}}},
			[]string{"192.0.2.3:80/TCP 10.0.0.1:80,10.0.0.2:80", "192.0.2.3:53/UDP 10.0.0.1:80,10.0.0.2:80"},
			[]string{"192.0.2.3"}},
	} {
		got, served := step.ds.Render(nil)
		var lines []string
		keys := map[proxy.Key]bool{}
		for _, s := range got {
			if keys[s.Key()] {
				t.Errorf("%s: key %s rendered twice", step.name, s.Key())
			}
			keys[s.Key()] = true
			var bs []string
			for _, x := range s.Backends {
				if proxy.FamilyOf(x.Addr.Addr()) != s.AddrFamily() {
					t.Errorf("%s: %s mixes families: backend %s", step.name, s.Key(), x.Addr)
				}
				bs = append(bs, x.Addr.String())
			}
			if len(bs) == 0 {
				bs = []string{"-"}
			}
			if !s.VIP.IsValid() && !strings.HasSuffix(s.Name, NodePortSuffix) {
				t.Errorf("%s: node-port service named %q", step.name, s.Name)
			}
			lines = append(lines, s.Key().String()+" "+strings.Join(bs, ","))
		}
		var vips []string
		for _, v := range served {
			vips = append(vips, v.String())
		}
		if !slices.Equal(lines, step.want) || !slices.Equal(vips, step.vips) {
			t.Errorf("%s:\n got %q served %v\nwant %q served %v", step.name, lines, vips, step.want, step.vips)
			continue
		}
		t.Logf("%s: %s", step.name, fmt.Sprint(lines))
	}
}
