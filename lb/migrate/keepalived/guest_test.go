//go:build ipvsguest

package keepalived

import (
	"context"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy/ipvs"
)

// TestIPVSGuestKeepalived: the converted keepalived.conf, through the
// engine and edgelb's IPVS dataplane in a namespace of the guest kernel,
// gives the IPVS table keepalived's configuration describes: the real
// ipvsadm's -Sn equals testdata/lvs.ipvsadm-Sn, written by hand.
func TestIPVSGuestKeepalived(t *testing.T) {
	netns.RequireRoot(t)
	if err := ipvs.Available(); err != nil {
		t.Fatalf("the guest kernel must have IPVS: %v", err)
	}
	_, cfg, _ := convertConf(t, "testdata/lvs.conf")
	desired := desiredFor(t, cfg)
	n := netns.NewT(t, "kag")
	d, err := ipvs.New(ipvs.Options{NetNS: "/run/netns/" + n.Name, SetSysctls: true, CallTimeout: 30 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := d.Apply(ctx, desired); err != nil {
		t.Fatal(err)
	}
	out, err := n.Exec(ctx, "ipvsadm", "-Sn")
	if err != nil {
		t.Fatalf("the guest needs the real ipvsadm (lab/guest copies it in): %v", err)
	}
	want := readFile(t, "testdata/lvs.ipvsadm-Sn")
	if string(out) != want {
		t.Fatalf("ipvsadm -Sn in the guest:\n%s\nwant (testdata/lvs.ipvsadm-Sn):\n%s", out, want)
	}
	t.Logf("ipvsadm -Sn equals testdata/lvs.ipvsadm-Sn:\n%s", out)
}
