package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const stateSyncL2 = "announce: {l2: {interface: eth0}}\n"

func TestStateSyncParses(t *testing.T) {
	cfg := mustParse(t, pool+`announce:
  l2:
    interface: eth0
    sourceAddresses: ["198.51.100.250", "2001:db8:1::fa"]
    sourceInterface: eth1
stateSync:
  conntrackd:
    interface: eth2
    peer: 10.0.0.2
`, nil)
	ct := cfg.StateSync.Conntrackd
	if ct == nil || ct.Interface != "eth2" || len(ct.Peers) != 1 || ct.Peers[0] != netip.MustParseAddr("10.0.0.2") || ct.Port != DefaultConntrackdPort ||
		ct.Binary != DefaultConntrackdBinary || ct.Address.IsValid() ||
		ct.CommitTimeout != 3*time.Hour {
		t.Fatalf("conntrackd = %+v", ct)
	}
	l2 := cfg.Announce.L2
	if len(l2.SourceAddresses) != 2 || l2.SourceAddresses[1] != netip.MustParseAddr("2001:db8:1::fa") || l2.SourceInterface != "eth1" {
		t.Fatalf("l2 = %+v", l2)
	}
	cfg = mustParse(t, pool+stateSyncL2+"stateSync: {conntrackd: {interface: eth2, peers: [10.0.0.2, 10.0.0.3], port: 3800, address: 10.0.0.1}}\n", nil)
	if ct := cfg.StateSync.Conntrackd; len(ct.Peers) != 2 || ct.Peers[1] != netip.MustParseAddr("10.0.0.3") || ct.Port != 3800 {
		t.Fatalf("conntrackd = %+v", ct)
	}
	for in, want := range map[string]time.Duration{"0s": 0, "10s": 10 * time.Second, "15m": 15 * time.Minute, "120h": 120 * time.Hour} {
		cfg = mustParse(t, pool+stateSyncL2+"stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, commitTimeout: "+in+"}}\n", nil)
		if got := cfg.StateSync.Conntrackd.CommitTimeout; got != want {
			t.Errorf("commitTimeout %s parsed as %v", in, got)
		}
	}
	if cfg := mustParse(t, pool, nil); cfg.StateSync.Conntrackd != nil {
		t.Fatalf("absent section parsed as %+v", cfg.StateSync.Conntrackd)
	}
}

func TestStateSyncErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []want
	}{
		{"no peer", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2}}\n",
			[]want{{"stateSync.conntrackd.peers", "required: the other gateways' addresses"}}},
		{"peer and peers", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, peers: [10.0.0.3]}}\n",
			[]want{{"stateSync.conntrackd.peer", `"10.0.0.2": set peer (two gateways) or peers, not both`}}},
		{"coalesce refused", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, coalesce: 200ms}}\n",
			[]want{{"stateSync.conntrackd.coalesce", `"200ms": is no longer supported: edgelb no longer holds conntrackd stopped`}}},
		{"coalesce 0s refused too", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, coalesce: 0s}}\n",
			[]want{{"stateSync.conntrackd.coalesce", `"0s": is no longer supported`}}},
		{"commitTimeout too short", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, commitTimeout: 9s}}\n",
			[]want{{"stateSync.conntrackd.commitTimeout", `"9s": want 0s (conntrackd's own estimate`}}},
		{"commitTimeout too long", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, commitTimeout: 121h}}\n",
			[]want{{"stateSync.conntrackd.commitTimeout", `"121h0m0s": want 0s`}}},
		{"commitTimeout not a duration", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, commitTimeout: 1 hour}}\n",
			[]want{{"stateSync.conntrackd.commitTimeout", `"1 hour": want a duration`}}},
		{"multicast group", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, multicastGroup: 225.0.0.50}}\n",
			[]want{{"stateSync.conntrackd.multicastGroup", `"225.0.0.50": is no longer supported: conntrackd tracks one message sequence per channel`}}},
		{"peer multicast", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 225.0.0.1}}\n",
			[]want{{"stateSync.conntrackd.peer", `"225.0.0.1": want another gateway's unicast address`}}},
		{"peers multicast", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peers: [10.0.0.2, 225.0.0.1]}}\n",
			[]want{{"stateSync.conntrackd.peers[1]", `"225.0.0.1": want another gateway's unicast address`}}},
		{"peer twice", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peers: [10.0.0.2, 10.0.0.3, 10.0.0.2]}}\n",
			[]want{{"stateSync.conntrackd.peers[2]", `"10.0.0.2": listed twice (also stateSync.conntrackd.peers[0])`}}},
		{"own address", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, address: 10.0.0.1, peers: [10.0.0.2, 10.0.0.1]}}\n",
			[]want{{"stateSync.conntrackd.peers[1]", `"10.0.0.1": is this gateway's own address`}}},
		{"peers families", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peers: [10.0.0.2, \"fd00::3\"]}}\n",
			[]want{{"stateSync.conntrackd.peers[1]", `"fd00::3": is not of the family of stateSync.conntrackd.peers[0] 10.0.0.2`}}},
		{"bad peers item", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peers: [10.0.0.2, gw3]}}\n",
			[]want{{"stateSync.conntrackd.peers[1]", `"gw3": not an IP address`}}},
		{"port too high for the pairs", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, port: 65535, peers: [10.0.0.2, 10.0.0.3]}}\n",
			[]want{{"stateSync.conntrackd.port", `"65535": too high for 3 gateways: the 3 pairs use ports 65535 and up`}}},
		{"address family", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, address: \"fd00::1\"}}\n",
			[]want{{"stateSync.conntrackd.address", `"fd00::1": is not of the family of stateSync.conntrackd.peer 10.0.0.2`}}},
		{"bad peer", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: gw2}}\n",
			[]want{{"stateSync.conntrackd.peer", `"gw2": not an IP address`}}},
		{"no interface", stateSyncL2 + "stateSync: {conntrackd: {peer: 10.0.0.2}}\n",
			[]want{{"stateSync.conntrackd.interface", "required"}}},
		{"port", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2, port: 70000}}\n",
			[]want{{"stateSync.conntrackd.port", `"70000"`}}},
		{"no l2", "stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2}}\n",
			[]want{{"stateSync.conntrackd", "needs announce.l2"}}},
		{"ipvs", stateSyncL2 + "dataplane: {mode: ipvs}\nstateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2}}\n",
			[]want{{"stateSync.conntrackd", "dataplane.mode is ipvs"}}},
		{"unknown field", stateSyncL2 + "stateSync: {conntrackd: {interface: eth2, peerz: [10.0.0.2]}}\n",
			[]want{{"stateSync.conntrackd.peerz", `unknown field (did you mean "peer`}}},
		{"source in pool", pool + "announce: {l2: {interface: eth0, sourceAddresses: [192.0.2.7]}}\n",
			[]want{{"announce.l2.sourceAddresses[0]", `"192.0.2.7": inside pool "p" (192.0.2.0/24)`}}},
		{"two sources of a family", "announce: {l2: {interface: eth0, sourceAddresses: [198.51.100.1, 198.51.100.2]}}\n",
			[]want{{"announce.l2.sourceAddresses[1]", `"198.51.100.2": a second IPv4 address (also sourceAddresses[0])`}}},
		{"source loopback", "announce: {l2: {interface: eth0, sourceAddresses: [127.0.0.9]}}\n",
			[]want{{"announce.l2.sourceAddresses[0]", `"127.0.0.9": loopback (RFC 1122) is not usable as a floating source address`}}},
		{"source interface", "announce: {l2: {interface: eth0, sourceInterface: \"a/b\", sourceAddresses: [198.51.100.1]}}\n",
			[]want{{"announce.l2.sourceInterface", `"a/b": not a valid interface name`}}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			_, err := parseWith(tc.yaml, nil)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			assertErrors(t, err, tc.want)
		})
	}
}

// The relation errors are typed: a caller tells them apart with errors.Is.
func TestStateSyncRelationErrorIsTyped(t *testing.T) {
	_, err := parseWith("stateSync: {conntrackd: {interface: eth2, peer: 10.0.0.2}}\n", nil)
	if !errors.Is(err, ErrStateSync) {
		t.Fatalf("%v does not wrap ErrStateSync", err)
	}
}
