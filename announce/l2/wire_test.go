package l2

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func sampleState() nodeState {
	return nodeState{Name: "gw-a", Gen: 1763795000123456789, Healthy: true, Uplink: true, Settled: true,
		VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.101"),
			netip.MustParseAddr("2001:db8::100")},
		Claimed: []netip.Addr{netip.MustParseAddr("192.0.2.101")}}
}

func TestWireRoundTrip(t *testing.T) {
	for _, s := range []nodeState{sampleState(), {Name: "x", Gen: 1}} {
		got, err := unmarshalState(s.marshal())
		if err != nil {
			t.Fatal(err)
		}
		if s.VIPs == nil {
			s.VIPs, s.Claimed = []netip.Addr{}, []netip.Addr{}
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
		}
	}
}

func TestWireRejects(t *testing.T) {
	good := sampleState().marshal()
	notReady := sampleState()
	notReady.Settled = false
	for name, b := range map[string][]byte{
		"empty":            nil,
		"bad magic":        append([]byte("XL2"), good[3:]...),
		"version 2":        append(append([]byte{}, good[:3]...), append([]byte{2}, good[4:]...)...),
		"truncated":        good[:len(good)-3],
		"trailing":         append(append([]byte{}, good...), 0),
		"claims while not": notReady.marshal(),
		"claims unserved": (nodeState{Name: "a", Healthy: true, Uplink: true, Settled: true,
			Claimed: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}).marshal(),
		"huge count": func() []byte {
			b := (nodeState{Name: "a"}).marshal()
			b[len(b)-8] = 0x7f
			return b
		}(),
	} {
		if _, err := unmarshalState(b); !errors.Is(err, errWire) {
			t.Errorf("%s: err %v, want errWire", name, err)
		}
	}
}

// FuzzUnmarshalState: whatever arrives from the network either decodes into
// a consistent state that re-encodes identically, or is refused.
func FuzzUnmarshalState(f *testing.F) {
	for _, s := range wireSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := unmarshalState(b)
		if err != nil {
			return
		}
		if len(s.Claimed) > 0 && !s.Ready() {
			t.Fatal("accepted claims from a not-ready member")
		}
		again, err := unmarshalState(s.marshal())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encode: %v\n%+v\n%+v", err, again, s)
		}
	})
}

func wireSeeds() map[string][]byte {
	return map[string][]byte{
		"full":  sampleState().marshal(),
		"empty": (nodeState{Name: "gw-b", Gen: 7}).marshal(),
		"short": []byte("EL2\x01"),
	}
}

func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("EDGELB_WRITE_CORPUS") != "1" {
		t.Skip("set EDGELB_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzUnmarshalState")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range wireSeeds() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
