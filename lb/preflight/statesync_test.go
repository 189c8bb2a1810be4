package preflight

import (
	"fmt"
	"slices"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

const syncBase = `pools: [{name: p, addresses: ["192.0.2.0/24"]}]
services:
  - {name: a, pool: p, ports: [{port: 80}], backends: [{address: "198.51.100.1"}]}
  - {name: b, pool: p, method: nat-nosnat, ports: [{port: 81}], backends: [{address: "198.51.100.1"}]}
dataplane: {mode: nftables}
`

func syncFindingCodes(t *testing.T, y string, links ...string) []string {
	t.Helper()
	cfg, err := config.Parse([]byte(syncBase + y))
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, f := range stateSyncFindings(cfg, func(n string) bool { return slices.Contains(links, n) }) {
		codes = append(codes, f.Severity.String()+" "+f.Code)
	}
	return codes
}

func TestStateSyncFindings(t *testing.T) {
	members := "announce: {l2: {interface: eth0, members: {name: gw1, join: [\"192.0.2.250\"]}%s}}\n"
	for _, tc := range []struct {
		name, yaml string
		links      []string
		want       []string
	}{
		{"alone: nothing moves", "announce: {l2: {interface: eth0}}\n", nil, nil},
		{"cluster without sync or source", fmt.Sprintf(members, ""), nil,
			[]string{hostcheck.Warn.String() + " nosnat-backend-route"}},
		{"sync without source, nat services", fmt.Sprintf(members, "") + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, binary: /bin/true}}\n", []string{"eth2"},
			[]string{hostcheck.Warn.String() + " statesync-no-source", hostcheck.Warn.String() + " nosnat-backend-route"}},
		{"source without sync", fmt.Sprintf(members, ", sourceAddresses: [198.51.100.250]"), nil,
			[]string{hostcheck.Warn.String() + " source-no-statesync"}},
		{"complete", fmt.Sprintf(members, ", sourceAddresses: [198.51.100.250], sourceInterface: eth1") + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, binary: /bin/true}}\n",
			[]string{"eth1", "eth2"}, nil},
		{"missing binary and links", fmt.Sprintf(members, ", sourceAddresses: [198.51.100.250], sourceInterface: eth1") + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, binary: /nonexistent/conntrackd}}\n",
			nil, []string{hostcheck.Error.String() + " statesync-binary", hostcheck.Error.String() + " statesync-interface", hostcheck.Error.String() + " source-interface"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncFindingCodes(t, tc.yaml, tc.links...); !slices.Equal(got, tc.want) {
				t.Errorf("findings %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIPVSStateSyncFindings(t *testing.T) {
	cfg, err := config.Parse([]byte(syncBase + "announce: {l2: {interface: eth0, sourceAddresses: [198.51.100.250]}}\nstateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, f := range ipvsStateSyncFindings(cfg) {
		codes = append(codes, f.Severity.String()+" "+f.Code)
	}
	want := []string{hostcheck.Error.String() + " statesync-dataplane", hostcheck.Error.String() + " source-dataplane"}
	if !slices.Equal(codes, want) {
		t.Fatalf("findings %q, want %q", codes, want)
	}
}
