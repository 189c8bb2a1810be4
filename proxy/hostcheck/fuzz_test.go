package hostcheck

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// FuzzParsePortList: never panics; a parsed list is coalesced (sorted, no
// two ranges touching) and survives a format/parse round trip unchanged.
func FuzzParsePortList(f *testing.F) {
	for _, s := range []string{"", "8080", "8080,30000-32767\n", "1-5,3-9,10", "65535,0", "5-3", "1,,2", " 1 , 2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParsePortList(s)
		if err != nil {
			return
		}
		for i := range l {
			if l[i].Last < l[i].First {
				t.Fatalf("%q: reversed range %v", s, l[i])
			}
			if i > 0 && int(l[i-1].Last)+1 >= int(l[i].First) {
				t.Fatalf("%q: not coalesced: %v", s, l)
			}
		}
		again, err := ParsePortList(FormatPortList(l))
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("%q: round trip %v -> %q -> %v, %v", s, l, FormatPortList(l), again, err)
		}
		// Merging the node-port range keeps every port that was reserved.
		m := Relate(PortRange{30000, 32767}, Ephemeral{Range: PortRange{32768, 60999}, Reserved: l}).MergedReserved
		if len(Subtract(l, m)) != 0 {
			t.Fatalf("%q: merge %v dropped ports of %v", s, m, l)
		}
	})
}

// FuzzParseSockets: never panics, whatever the table holds.
func FuzzParseSockets(f *testing.F) {
	f.Add("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 620 1 000000001a8154fa 100 0 0 10 0\n")
	f.Add("   0: B80D0120000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n")
	f.Add("0: x y z")
	f.Fuzz(func(t *testing.T, s string) {
		socks, err := ParseSockets(strings.NewReader(s), proxy.TCP)
		if err != nil {
			return
		}
		for _, so := range socks {
			if !so.Local.Addr().IsValid() || !so.Remote.Addr().IsValid() {
				t.Fatalf("%q: invalid address in %+v", s, so)
			}
		}
	})
}
