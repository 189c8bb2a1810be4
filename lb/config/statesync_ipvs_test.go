package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

const ipvsMode = "dataplane: {mode: ipvs}\n"

func TestIPVSSyncParses(t *testing.T) {
	cfg := mustParse(t, pool+ipvsMode+"stateSync: {ipvs: {interface: sync0, syncID: 7}}\n", nil)
	s := cfg.StateSync.IPVS
	if s == nil || s.Interface != "sync0" || s.SyncID != 7 || s.MulticastGroup.IsValid() || s.Port != 0 || s.TTL != 0 {
		t.Fatalf("ipvs = %+v", s)
	}
	cfg = mustParse(t, pool+ipvsMode+"stateSync: {ipvs: {interface: sync0, syncID: 0, multicastGroup: \"ff02::81\", port: 8849, ttl: 2}}\n", nil)
	if s := cfg.StateSync.IPVS; s.MulticastGroup != netip.MustParseAddr("ff02::81") || s.Port != 8849 || s.TTL != 2 || s.SyncID != 0 {
		t.Fatalf("ipvs = %+v", s)
	}
	if cfg := mustParse(t, pool, nil); cfg.StateSync.IPVS != nil {
		t.Fatalf("absent section parsed as %+v", cfg.StateSync.IPVS)
	}
}

func TestIPVSSyncErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []want
	}{
		{"no syncID", ipvsMode + "stateSync: {ipvs: {interface: sync0}}\n",
			[]want{{"stateSync.ipvs.syncID", "required"}}},
		{"syncID range", ipvsMode + "stateSync: {ipvs: {interface: sync0, syncID: 256}}\n",
			[]want{{"stateSync.ipvs.syncID", `"256": out of range 0-255`}}},
		{"no interface", ipvsMode + "stateSync: {ipvs: {syncID: 1}}\n",
			[]want{{"stateSync.ipvs.interface", "required"}}},
		{"group unicast", ipvsMode + "stateSync: {ipvs: {interface: sync0, syncID: 1, multicastGroup: 10.0.0.9}}\n",
			[]want{{"stateSync.ipvs.multicastGroup", `"10.0.0.9": want a multicast group`}}},
		{"port", ipvsMode + "stateSync: {ipvs: {interface: sync0, syncID: 1, port: 70000}}\n",
			[]want{{"stateSync.ipvs.port", `"70000"`}}},
		{"ttl", ipvsMode + "stateSync: {ipvs: {interface: sync0, syncID: 1, ttl: 300}}\n",
			[]want{{"stateSync.ipvs.ttl", `"300": out of range 1-255`}}},
		{"nftables", "dataplane: {mode: nftables}\nstateSync: {ipvs: {interface: sync0, syncID: 1}}\n",
			[]want{{"stateSync.ipvs", `dataplane.mode is "nftables"`}}},
		{"unknown field", ipvsMode + "stateSync: {ipvs: {interface: sync0, syncid: 1}}\n",
			[]want{{"stateSync.ipvs.syncid", `did you mean "syncID"?`}}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			_, err := parseWith(tc.yaml, nil)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			assertErrors(t, err, tc.want)
		})
	}
	if _, err := parseWith("stateSync: {ipvs: {interface: sync0, syncID: 1}}\n", nil); !errors.Is(err, ErrStateSync) {
		t.Fatalf("%v does not wrap ErrStateSync", err)
	}
}
