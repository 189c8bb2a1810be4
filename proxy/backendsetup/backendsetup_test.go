package backendsetup

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

func TestPlanScript(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.100")
	dr := Plan(proxy.DirectRouting, []netip.Addr{vip}).Script()
	for _, want := range []string{"arp_ignore=1", "arp_announce=2", "ip addr add 192.0.2.100/32 dev lo"} {
		if !strings.Contains(dr, want) {
			t.Errorf("dr script lacks %q:\n%s", want, dr)
		}
	}
	if strings.Contains(dr, "rp_filter") {
		t.Errorf("dr must not relax rp_filter:\n%s", dr)
	}
	tun := Plan(proxy.Tunnel, []netip.Addr{vip}).Script()
	for _, want := range []string{"modprobe ipip", "tunl0.rp_filter=0", "all.rp_filter=0", "dev tunl0"} {
		if !strings.Contains(tun, want) {
			t.Errorf("tunnel script lacks %q:\n%s", want, tun)
		}
	}
}
