//go:build netns

package ipvs

import (
	"errors"
	"strings"
	"testing"

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
