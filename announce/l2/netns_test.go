//go:build netns

package l2

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsL2UplinkCarrier: the real announcer (real ARP/NDP responders, the
// rtnetlink uplink watch) on a veth: it answers for its VIPs, gives them up
// when the link loses carrier, and takes them back when it returns.
func TestNetnsL2UplinkCarrier(t *testing.T) {
	netns.RequireRoot(t)
	if _, err := exec.LookPath("arping"); err != nil {
		t.Skip("arping not installed (lab/deps.sh netns)")
	}
	gw, cl := netns.NewT(t, "elb-l2g"), netns.NewT(t, "elb-l2c")
	if err := netns.Veth(gw, "gw0", cl, "cl0"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns   *netns.NS
		link string
		addr string
	}{{gw, "gw0", "192.0.2.1/24"}, {cl, "cl0", "192.0.2.2/24"}} {
		if err := s.ns.AddAddr(s.link, netip.MustParsePrefix(s.addr)); err != nil {
			t.Fatal(err)
		}
	}
	gwMAC, _ := gw.MAC("gw0")
	vip4, vip6 := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8::100")

	var a *Announcer
	if err := gw.Do(func() error {
		var err error
		a, err = New(Config{Interface: "gw0", GARPInterval: 50 * time.Millisecond})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(true) })
	if err := a.SetVIPs(context.Background(), []announce.VIP{{Addr: vip4}, {Addr: vip6}}); err != nil {
		t.Fatal(err)
	}
	arping := func() int {
		out, _ := cl.Command(context.Background(), "arping", "-c", "3", "-w", "4", "-I", "cl0", vip4.String()).CombinedOutput()
		return strings.Count(strings.ToLower(string(out)), "reply from "+vip4.String()+" ["+gwMAC.String()+"]")
	}
	if got := arping(); got != 3 {
		t.Fatalf("arping before carrier loss: %d/3", got)
	}
	t.Logf("alone on gw0: owns %v, arping 3/3 with %s", a.Owned(), gwMAC)

	waitOwned := func(want int) time.Duration {
		t0 := time.Now()
		for len(a.Owned()) != want {
			if time.Since(t0) > 5*time.Second {
				t.Fatalf("owned %v, want %d VIPs", a.Owned(), want)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(t0)
	}
	// The peer end goes down: gw0 loses carrier (NO-CARRIER, still admin up).
	link, err := cl.Netlink().LinkByName("cl0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Netlink().LinkSetDown(link); err != nil {
		t.Fatal(err)
	}
	d := waitOwned(0)
	st := a.Status()
	if !strings.Contains(st.Peers[0].Detail, "uplink down") {
		t.Fatalf("status after carrier loss: %+v", st.Peers[0])
	}
	t.Logf("carrier lost on gw0: all VIPs given up after %v; status: %s", d.Round(time.Millisecond), st.Peers[0].Detail)

	if err := cl.Netlink().LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	d = waitOwned(2)
	t.Logf("carrier back: VIPs owned again after %v", d.Round(time.Millisecond))
	if got := arping(); got != 3 {
		t.Fatalf("arping after carrier returned: %d/3", got)
	}

	// The service goes: the daemon declares the VIP no more; nothing answers.
	if err := a.SetVIPs(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := arping(); got != 0 {
		t.Fatalf("arping after the VIP was removed: %d/3", got)
	}
	t.Log("VIP removed through SetVIPs: arping 0/3")
}
