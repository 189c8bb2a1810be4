package ipvs

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

const sampleConnTable = `Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP C0000202 9C40 CB00710A 0050 C6336402 1F90 ESTABLISHED     899
UDP C0000202 D431 CB00710A 0035 C6336403 0035 UDP             298
TCP C0000202 0000 CB00710A 0050 C6336402 1F90 NONE            359
TCP 2001:0db8:0000:0000:0000:0000:0000:0002 C350 2001:0db8:0000:0000:0000:0000:0000:000a 0050 2001:0db8:0000:0000:0000:0000:0001:0002 1F90 TIME_WAIT        59
`

func TestParseConnTable(t *testing.T) {
	conns, err := ParseConnTable(strings.NewReader(sampleConnTable))
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 4 {
		t.Fatalf("got %d conns: %+v", len(conns), conns)
	}
	c := conns[0]
	if c.Protocol != proxy.TCP || c.Client != netip.MustParseAddrPort("192.0.2.2:40000") ||
		c.Virtual != netip.MustParseAddrPort("203.0.113.10:80") || c.Dest != netip.MustParseAddrPort("198.51.100.2:8080") ||
		c.State != "ESTABLISHED" || c.Expires != 899 || c.Template {
		t.Fatalf("conn 0: %+v", c)
	}
	if conns[1].Protocol != proxy.UDP || conns[1].Virtual.Port() != 53 {
		t.Fatalf("conn 1: %+v", conns[1])
	}
	if !conns[2].Template {
		t.Fatalf("template not recognised: %+v", conns[2])
	}
	if conns[3].Client != netip.MustParseAddrPort("[2001:db8::2]:50000") || conns[3].Dest != netip.MustParseAddrPort("[2001:db8::1:2]:8080") {
		t.Fatalf("v6: %+v", conns[3])
	}
	if flowID(conns[0]) == flowID(conns[1]) || flowID(conns[0]) != flowID(conns[0]) {
		t.Fatal("flow ids")
	}
}

func TestParseConnTableReportsBadLines(t *testing.T) {
	in := sampleConnTable + "TCP ZZZZ 0050 CB00710A 0050 C6336402 1F90 ESTABLISHED 1\nshort line\n"
	conns, err := ParseConnTable(strings.NewReader(in))
	if len(conns) != 4 || err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "line 7") {
		t.Fatalf("conns %d err %v", len(conns), err)
	}
}

func FuzzParseConnTable(f *testing.F) {
	f.Add(sampleConnTable)
	f.Add("TCP 00000000 0000 00000000 0000 00000000 0000 X 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		conns, _ := ParseConnTable(strings.NewReader(s))
		for _, c := range conns {
			if !c.Client.IsValid() || !c.Virtual.IsValid() || !c.Dest.IsValid() {
				t.Fatalf("invalid address in %+v", c)
			}
			if c.Protocol != proxy.TCP && c.Protocol != proxy.UDP {
				t.Fatalf("protocol %v", c.Protocol)
			}
			if c.Client.Addr().Is4In6() || c.Dest.Addr().Zone() != "" {
				t.Fatalf("unnormalised address in %+v", c)
			}
		}
	})
}
