package fake

import (
	"context"
	"net/netip"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestNodePortPerFamily (issue 14): a dual-stack node port is two services,
// one per family, told apart by Key.Family; a service mixing families is
// refused alone (NAT does not cross families), as nftables and IPVS refuse it.
func TestNodePortPerFamily(t *testing.T) {
	ap := netip.MustParseAddrPort
	v4 := proxy.Service{Name: "web/http/nodeport", NodePort: 30080, Protocol: proxy.TCP, Family: proxy.IPv4,
		Backends: []proxy.Backend{{Addr: ap("10.0.0.2:8080"), Weight: 1}}}
	v6 := proxy.Service{Name: "web/http/nodeport", NodePort: 30080, Protocol: proxy.TCP, Family: proxy.IPv6,
		Backends: []proxy.Backend{{Addr: ap("[fd00::2]:8080"), Weight: 1}}}
	if v4.Key() == v6.Key() {
		t.Fatalf("the two families' node-port keys collide: %s", v4.Key())
	}
	nodes := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	for _, opts := range []Options{{}, NFTablesOptions} {
		d := New(opts)
		if err := d.Apply(context.Background(), proxy.Config{Services: []proxy.Service{v4, v6}, NodeAddrs: nodes}); err != nil {
			t.Fatalf("%s: both families of one node port: %v", opts.Name, err)
		}
		mixed := v4
		mixed.NodePort = 30081
		mixed.Backends = append(append([]proxy.Backend(nil), v4.Backends...), v6.Backends...)
		err := d.Apply(context.Background(), proxy.Config{Services: []proxy.Service{v4, v6, mixed}, NodeAddrs: nodes})
		failed := proxy.FailedServices(err)
		if !proxy.Partial(err) || len(failed) != 1 || failed[mixed.Key()] == nil {
			t.Fatalf("%s: mixed families: %v, want only %s refused", opts.Name, err, mixed.Key())
		}
		t.Logf("%s: %s refused alone: %v", opts.Name, mixed.Key(), failed[mixed.Key()])
	}
	if got := v6.Key().String(); got != "nodeport6:30080/TCP" {
		t.Errorf("v6 key %q", got)
	}
}
