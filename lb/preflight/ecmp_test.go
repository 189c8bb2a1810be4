package preflight

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/announce/bfdd"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

func TestECMPFindings(t *testing.T) {
	const pools = "pools: [{name: p, addresses: [\"192.0.2.0/24\"]}]\ndataplane: {mode: nftables}\n"
	const bgp = "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65002}]}}\n"
	svc := func(name, extra string) string {
		return "  - {name: " + name + ", pool: p, ports: [{port: 80}], backends: [{address: \"198.51.100.1\"}]" + extra + "}\n"
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"no BGP: nothing is rehashed", pools + "services:\n" + svc("a", ""), nil},
		{"BGP, default scheduler", pools + bgp + "services:\n" + svc("a", ""), []string{"INFO ecmp-scheduler"}},
		{"BGP, mh nat-nosnat", pools + bgp + "services:\n" + svc("a", ", scheduler: mh, method: nat-nosnat"), nil},
		{"BGP, mh with masquerade", pools + bgp + "services:\n" + svc("a", ", scheduler: mh"), []string{"WARN ecmp-mh-masquerade"}},
		{"BGP, mixed", pools + bgp + "services:\n" + svc("a", "") + svc("b", ", scheduler: mh"),
			[]string{"INFO ecmp-scheduler", "WARN ecmp-mh-masquerade"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range ecmpFindings(cfg) {
				got = append(got, f.Severity.String()+" "+f.Code)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHoldTimeFindings(t *testing.T) {
	cfg, err := config.Parse([]byte("announce: {bgp: {localASN: 65001, peers: [{name: tor1, address: 192.0.2.1, asn: 65002}, " +
		"{address: 192.0.2.2, asn: 65002, bfd: {enabled: true}}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := holdTimeFindings(cfg, func() error { return nil })
	if len(got) != 1 || got[0].Code != "bgp-failover-hold" || got[0].Severity != hostcheck.Warn ||
		!strings.Contains(got[0].Message, "peers[0] (tor1)") || !strings.Contains(got[0].Message, "hold time (1m30s)") {
		t.Fatalf("findings %+v", got)
	}
	got = holdTimeFindings(cfg, func() error { return exec.ErrNotFound })
	if len(got) != 2 || got[1].Code != "bgp-bfdd-missing" || got[1].Severity != hostcheck.Error {
		t.Fatalf("bfdd missing: %+v", got)
	}
	got = holdTimeFindings(cfg, func() error { return fmt.Errorf("%w: not in frrvty", bfdd.ErrPrivileges) })
	if len(got) != 2 || got[1].Code != "bgp-bfdd-privileges" || got[1].Severity != hostcheck.Warn ||
		!strings.Contains(got[1].Message, "peers[1] (192.0.2.2)") || !strings.Contains(got[1].Message, "not in frrvty") {
		t.Fatalf("bfdd privileges: %+v", got)
	}
}
