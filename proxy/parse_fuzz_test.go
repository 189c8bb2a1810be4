package proxy

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseNames: the protocol, scheduler and method names come from every
// front end (config file, REST, Kubernetes annotations). For any input each
// parser either refuses it quoting it, or returns a value whose own name
// parses back to itself.
func FuzzParseNames(f *testing.F) {
	for _, s := range []string{"", "TCP", "udp", "sctp", "rr", "mh", "wlc ", "nat", "nat-nosnat", "dr", "tunnel", "NAT", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		quoted := strconv.Quote(s)
		if p, err := ParseProtocol(s); err != nil {
			if !strings.Contains(err.Error(), quoted) {
				t.Fatalf("ParseProtocol(%s): %v does not quote the input", quoted, err)
			}
		} else if q, err := ParseProtocol(p.String()); err != nil || q != p {
			t.Fatalf("ParseProtocol(%s) = %v, whose name parses to %v, %v", quoted, p, q, err)
		}
		if sc, err := ParseScheduler(s); err != nil {
			if !strings.Contains(err.Error(), quoted) {
				t.Fatalf("ParseScheduler(%s): %v does not quote the input", quoted, err)
			}
		} else if q, err := ParseScheduler(string(sc)); err != nil || q != sc {
			t.Fatalf("ParseScheduler(%s) = %v, whose name parses to %v, %v", quoted, sc, q, err)
		}
		if m, err := ParseMethod(s); err != nil {
			if !strings.Contains(err.Error(), quoted) {
				t.Fatalf("ParseMethod(%s): %v does not quote the input", quoted, err)
			}
		} else if q, err := ParseMethod(string(m)); err != nil || q != m {
			t.Fatalf("ParseMethod(%s) = %v, whose name parses to %v, %v", quoted, m, q, err)
		}
	})
}
