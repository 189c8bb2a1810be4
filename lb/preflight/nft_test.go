package preflight

import (
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// TestNFTFindings: with mode auto on a kernel without IPVS, each scheduler,
// method and firewall mark nftables cannot do is one Error naming its field
// and quoting the value, from the same probe the validator uses for mode
// nftables (lb.CheckDataplane); what nftables does gives no finding.
func TestNFTFindings(t *testing.T) {
	cfg, err := config.Parse([]byte(`pools: [{name: p, addresses: ["192.0.2.0/24"]}]
services:
  - {name: ok, pool: p, scheduler: mh, method: nat-nosnat, ports: [{port: 80}], backends: [{address: "198.51.100.1"}]}
  - {name: lc, pool: p, scheduler: lc, ports: [{port: 81}], backends: [{address: "198.51.100.1"}]}
  - {name: dr, pool: p, method: dr, ports: [{port: 82}], backends: [{address: "198.51.100.1"}]}
  - {name: mark, fwmark: 7, method: tunnel, backends: [{address: "198.51.100.1"}]}
dataplane: {mode: auto}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range nftFindings(cfg) {
		if f.Severity != hostcheck.Error || f.Code != CodeDataplaneUnsupported || !strings.Contains(f.Message, "the dataplane here is nftables") {
			t.Errorf("finding %+v", f)
		}
		got = append(got, f.Message)
	}
	want := []string{
		`services[1].scheduler "lc": refused by the dataplane: scheduler "lc"`,
		`services[2].method "dr": refused by the dataplane: method "dr"`,
		`services[3].method "tunnel": refused by the dataplane: method "tunnel"`,
		`services[3].fwmark "7": refused by the dataplane: fwmark 7`,
	}
	if len(got) != len(want) {
		t.Fatalf("findings:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("finding %d: %s\nwant prefix %s", i, got[i], want[i])
		}
	}
}
