package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// TestFWMarkService: a firewall-mark service needs no VIP or pool in a
// config file, and is refused naming services[0].fwmark when the
// dataplane is nftables (never silently dropped).
func TestFWMarkService(t *testing.T) {
	const svc = "services:\n- name: marked\n  fwmark: 1\n  method: nat-nosnat\n  backends: [{address: 198.51.100.1}]\n"
	c, err := Parse([]byte(svc + "dataplane: {mode: ipvs}\n"))
	if err != nil || c.Services[0].FWMark != 1 {
		t.Fatalf("ipvs: %v", err)
	}
	_, err = Parse([]byte(svc + "dataplane: {mode: nftables}\n"))
	if err == nil || !errors.Is(err, proxy.ErrUnsupported) || !strings.Contains(err.Error(), "services[0].fwmark") {
		t.Fatalf("nftables: %v, want services[0].fwmark refused wrapping ErrUnsupported", err)
	}
	t.Logf("nftables: %v", err)
}
