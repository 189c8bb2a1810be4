//go:build netns

package ipvs

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsIPVSMissing: on a kernel without IPVS the dataplane fails fast,
// naming the missing feature — no panic, no dataplane that silently does
// nothing — and `dataplane: auto` picks nftables and says why.
func TestNetnsIPVSMissing(t *testing.T) {
	if _, err := netlink.GenlFamilyGet("IPVS"); err == nil {
		t.Skip("this kernel has IPVS: the missing-IPVS path cannot be shown here (the guest suite covers IPVS)")
	} else if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("probe: %v", err)
	}
	ns := netns.NewT(t, "elbipvs")
	var d *Dataplane
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("New panicked: %v", r)
			}
		}()
		d, err = New(Options{NetNS: "/run/netns/" + ns.Name})
	}()
	if d != nil || err == nil {
		t.Fatalf("New succeeded on a kernel without IPVS: %v", d)
	}
	t.Logf("New: %v", err)
	if !errors.Is(err, proxy.ErrKernelFeature) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("error does not wrap ErrKernelFeature and ENOENT: %v", err)
	}
	for _, want := range []string{"CONFIG_IP_VS", "ip_vs", `"IPVS"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if err := Available(); !errors.Is(err, proxy.ErrKernelFeature) {
		t.Fatalf("Available: %v", err)
	}
	name, why := Probe()
	t.Logf("Probe: %s: %s", name, why)
	if name != "nftables" || !strings.Contains(why, "nftables") || !strings.Contains(why, "CONFIG_IP_VS") {
		t.Fatalf("auto did not fall back to nftables with a reason: %s %q", name, why)
	}
	// Nothing was created in the namespace on the way.
	if _, err := ns.Netlink().LinkByName(DefaultDevice); err == nil {
		t.Fatalf("%s was created although New failed", DefaultDevice)
	}
}

// TestNetnsSNATGenerationGate: the IPVS dataplane's own nftables table
// (nftSNAT, which needs no IPVS: this kernel runs it) is rebuilt by a
// resync's verify only when someone else committed since edgelb last knew it
// right — also when that commit came before an Apply's element change, which
// then must not count as clean — and a rebuild puts back what was deleted by
// hand.
func TestNetnsSNATGenerationGate(t *testing.T) {
	ns := netns.NewT(t, "elbsnat")
	n := &nftSNAT{netns: int(ns.Handle()), mark: DefaultMasqMark}
	t.Cleanup(func() { n.Delete(); n.Close() })
	k := func(port uint16) vsKey {
		return vsKey{Addr: netip.MustParseAddr("203.0.113.1"), Port: port, Proto: proxy.TCP}
	}
	front := map[vsKey]bool{k(80): true, k(443): true}
	set := func(how snatHow, want bool) {
		t.Helper()
		rebuilt, err := n.Set(front, front, how)
		if err != nil {
			t.Fatal(err)
		}
		if rebuilt != want {
			t.Fatalf("Set(%d): rebuilt %v, want %v", how, rebuilt, want)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	o := objs()
	elements := func() int {
		t.Helper()
		els, err := c.GetSetElements(&nftables.Set{Table: o.t, Name: o.front4.Name, KeyType: keyType4, Concatenation: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(els)
	}
	foreign := func() {
		t.Helper()
		c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "someone-else"})
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	set(snatDiff, true) // the first write builds the table
	set(snatVerify, false)
	front[k(8080)] = true
	set(snatDiff, false) // an element change from a clean state stays clean
	set(snatVerify, false)

	// Someone deletes one of our frontends: the next verify rebuilds.
	if err := c.SetDeleteElements(o.front4, []nftables.SetElement{{Key: setKey(k(80))}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	set(snatVerify, true)
	if got := elements(); got != 3 {
		t.Fatalf("frontends4 after the rebuild: %d elements, want 3", got)
	}
	set(snatVerify, false)

	// A foreign commit, then an Apply's element change: not clean, so the
	// next verify rebuilds; after that, quiet again.
	foreign()
	front[k(8443)] = true
	set(snatDiff, false)
	set(snatVerify, true)
	set(snatVerify, false)
	if got := elements(); got != 4 {
		t.Fatalf("frontends4: %d elements, want 4", got)
	}
}

// TestNetnsSNATMarks: mark services go into the table's marks set by value —
// a mark served in both families is one element — and leave it by diff and
// by rebuild alike; the two chains that give their connections edgelb's ct
// mark (input and output, filter priority) are there. (Traffic through a
// mark service is in the IPVS conformance suite: FWMark.)
func TestNetnsSNATMarks(t *testing.T) {
	ns := netns.NewT(t, "elbmark")
	n := &nftSNAT{netns: int(ns.Handle()), mark: DefaultMasqMark}
	t.Cleanup(func() { n.Delete(); n.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	o := objs()
	marks := func() []uint32 {
		t.Helper()
		els, err := c.GetSetElements(&nftables.Set{Table: o.t, Name: o.marks.Name, KeyType: nftables.TypeMark})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint32
		for _, e := range els {
			out = append(out, binaryutil.NativeEndian.Uint32(e.Key))
		}
		slices.Sort(out)
		return out
	}
	vip := vsKey{Addr: netip.MustParseAddr("203.0.113.1"), Port: 80, Proto: proxy.TCP}
	front := map[vsKey]bool{vip: true, markKey(1, proxy.IPv4): true, markKey(1, proxy.IPv6): true, markKey(7, proxy.IPv4): true}
	for _, step := range []struct {
		how  snatHow
		drop []vsKey
		want []uint32
	}{
		{snatDiff, nil, []uint32{1, 7}},                             // the first write builds the table
		{snatDiff, []vsKey{markKey(1, proxy.IPv4)}, []uint32{1, 7}}, // mark 1 still served in IPv6
		{snatDiff, []vsKey{markKey(7, proxy.IPv4)}, []uint32{1}},
		{snatRebuild, nil, []uint32{1}},
		{snatDiff, []vsKey{markKey(1, proxy.IPv6)}, nil},
	} {
		for _, k := range step.drop {
			delete(front, k)
		}
		if _, err := n.Set(front, nil, step.how); err != nil {
			t.Fatal(err)
		}
		if got := marks(); !slices.Equal(got, step.want) {
			t.Fatalf("after dropping %v: marks %v, want %v", step.drop, got, step.want)
		}
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, ch := range chains {
		if ch.Table.Name == TableName && *ch.Priority == *nftables.ChainPriorityFilter {
			found[ch.Name] = true
		}
	}
	if !found["fwmark-input"] || !found["fwmark-output"] {
		t.Fatalf("chains at filter priority: %v, want fwmark-input and fwmark-output", found)
	}
}
