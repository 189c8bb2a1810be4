package lb

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestOwnAddrs(t *testing.T) {
	o := NewOwnAddrs()
	o.AddPrefix(netip.MustParsePrefix("203.0.113.1/24"), "interface veth0")
	o.AddPrefix(netip.MustParsePrefix("198.51.100.9/31"), "interface p2p") // no broadcast on a /31
	o.AddPrefix(netip.MustParsePrefix("2001:db8:5::1/64"), "interface veth0")
	o.Add(netip.MustParseAddr("203.0.113.1"), "api.listen")
	o.Add(netip.Addr{}, "unset")
	o.Add(netip.MustParseAddr("0.0.0.0"), "api.listen") // unspecified: every address, listed per interface
	for _, c := range []struct {
		addr, why string
	}{
		{"203.0.113.1", "interface veth0, api.listen"},
		{"::ffff:203.0.113.1", "interface veth0, api.listen"},
		{"203.0.113.255", "broadcast address of 203.0.113.0/24 on interface veth0"},
		{"203.0.113.0", "network address of 203.0.113.0/24 on interface veth0"},
		{"198.51.100.9", "interface p2p"},
		{"2001:db8:5::1", "interface veth0"},
	} {
		why, ok := o.Why(netip.MustParseAddr(c.addr))
		if !ok || why != c.why {
			t.Errorf("Why(%s) = %q, %v; want %q", c.addr, why, ok, c.why)
		}
	}
	for _, a := range []string{"198.51.100.8", "198.51.100.255", "203.0.113.2", "2001:db8:5::", "0.0.0.0"} {
		if _, ok := o.Why(netip.MustParseAddr(a)); ok {
			t.Errorf("%s is not own", a)
		}
	}
	err := o.Check(netip.MustParseAddr("203.0.113.1"), UseVIP)
	if !errors.Is(err, ErrOwnAddress) || !strings.Contains(err.Error(), "203.0.113.1 is this gateway's own address (interface veth0, api.listen)") {
		t.Errorf("Check: %v", err)
	}
	r, _ := ParseRange("203.0.113.128/25")
	if err := o.CheckRange(r); !errors.Is(err, ErrOwnAddress) || !strings.Contains(err.Error(), "contains 203.0.113.255") {
		t.Errorf("CheckRange: %v", err)
	}
	r, _ = ParseRange("203.0.113.2-203.0.113.254")
	if err := o.CheckRange(r); err != nil {
		t.Errorf("CheckRange without an own address: %v", err)
	}
	var none *OwnAddrs
	if none.Check(netip.MustParseAddr("203.0.113.1"), UseVIP) != nil || none.CheckRange(r) != nil || !none.Equal(NewOwnAddrs()) {
		t.Error("a nil set is empty")
	}
	c := o.Clone()
	if !c.Equal(o) {
		t.Error("clone differs")
	}
	c.Add(netip.MustParseAddr("192.0.2.1"), "x")
	if c.Equal(o) || o.Len() == c.Len() {
		t.Error("a clone shares its map")
	}
}

// Conflict is the one rule both writers leave a service out by: every own
// VIP and backend named once, nothing for a set without them.
func TestOwnConflict(t *testing.T) {
	o := NewOwnAddrs()
	o.AddPrefix(netip.MustParsePrefix("203.0.113.1/24"), "interface veth0")
	a := netip.MustParseAddr
	got := o.Conflict([]netip.Addr{a("192.0.2.1"), a("203.0.113.1"), a("203.0.113.1")}, []netip.Addr{a("203.0.113.255"), a("198.51.100.2")})
	want := "not programmed: VIP 203.0.113.1 is this gateway's own address (interface veth0), never usable as a VIP: " + ErrOwnAddress.Error() +
		"; backend 203.0.113.255 is this gateway's own address (broadcast address of 203.0.113.0/24 on interface veth0), never usable as a backend: " + ErrOwnAddress.Error()
	if got != want {
		t.Errorf("Conflict:\n got %q\nwant %q", got, want)
	}
	if got := o.Conflict([]netip.Addr{a("192.0.2.1")}, []netip.Addr{a("198.51.100.2")}); got != "" {
		t.Errorf("no own address: %q", got)
	}
	var none *OwnAddrs
	if got := none.Conflict([]netip.Addr{a("203.0.113.1")}, nil); got != "" {
		t.Errorf("nil set: %q", got)
	}
}

// The one validator refuses own addresses as VIP, backend and pool range,
// naming the field and quoting the value.
func TestValidateOwnAddrs(t *testing.T) {
	own := NewOwnAddrs()
	own.AddPrefix(netip.MustParsePrefix("203.0.113.1/24"), "interface veth0")
	s := ServiceSpec{Name: "s", VIPs: []netip.Addr{netip.MustParseAddr("203.0.113.1")},
		Ports:    []PortSpec{{Port: 80, Protocol: 6}},
		Backends: []BackendSpec{{Addr: netip.MustParseAddr("203.0.113.255"), Port: 8080, Weight: 1}}}
	NormalizeService(&s)
	err := ValidateService(&s, ValidateOptions{Own: own})
	var errs *Errors
	if !errors.As(err, &errs) || len(errs.List) != 2 || !errors.Is(err, ErrOwnAddress) {
		t.Fatalf("got %v", err)
	}
	if f := errs.List[0]; f.Field != "vips[0]" || f.Value != "203.0.113.1" {
		t.Errorf("first: %v", f)
	}
	if f := errs.List[1]; f.Field != "backends[0].address" || f.Value != "203.0.113.255:8080" || !strings.Contains(f.Error(), "broadcast address of 203.0.113.0/24") {
		t.Errorf("second: %v", f)
	}
	r, _ := ParseRange("203.0.113.0/28")
	p := Pool{Name: "p", Ranges: []Range{r}}
	err = ValidateStandalonePool(&p, own)
	if !errors.As(err, &errs) || errs.List[0].Field != "addresses[0]" || !errors.Is(err, ErrOwnAddress) {
		t.Errorf("pool: %v", err)
	}
	if err := ValidateStandalonePool(&p, nil); err != nil {
		t.Errorf("pool without own addresses: %v", err)
	}
}
