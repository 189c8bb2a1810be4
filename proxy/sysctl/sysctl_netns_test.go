//go:build netns

package sysctl

import (
	"os"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// TestNetnsEnsure writes into a fresh namespace only: the caller's own
// settings are read before and after and must not move.
func TestNetnsEnsure(t *testing.T) {
	ns := netns.NewT(t, "elbsysctl")
	own := func() string {
		b, err := os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_announce")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	before := own()
	want := []hostcheck.Sysctl{
		{Name: "net.ipv4.ip_forward", Want: "1", Why: "test"},
		{Name: "net.ipv4.conf.all.arp_announce", Want: "2", Why: "test"},
		{Name: "net.ipv6.conf.edgelb-none.forwarding", Want: "1", Why: "test", Optional: true},
	}
	if err := Ensure(int(ns.Handle()), want); err != nil {
		t.Fatal(err)
	}
	for _, s := range want[:2] {
		if v, err := ns.ReadSysctl(s.Name); err != nil || strings.TrimSpace(v) != s.Want {
			t.Errorf("%s = %q (%v), want %s", s.Name, v, err, s.Want)
		}
	}
	if got := own(); got != before {
		t.Fatalf("the caller's own arp_announce moved from %s to %s", before, got)
	}
	if err := Ensure(int(ns.Handle()), want); err != nil {
		t.Fatalf("second call: %v", err)
	}
	missing := []hostcheck.Sysctl{{Name: "net.ipv4.edgelb_none", Want: "1", Why: "test"}}
	err := Ensure(int(ns.Handle()), missing)
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.edgelb_none=1") {
		t.Fatalf("an absent required setting: %v, want an error naming it", err)
	}
	t.Logf("absent required setting: %v", err)
	// One that a module creates names the module to load.
	missing = []hostcheck.Sysctl{{Name: "net.netfilter.nf_conntrack_edgelb_none", Want: "1", Why: "test"}}
	if err := Ensure(int(ns.Handle()), missing); err == nil || !strings.Contains(err.Error(), "modprobe nf_conntrack") {
		t.Fatalf("an absent nf_conntrack setting: %v, want an error naming the module", err)
	}
}
