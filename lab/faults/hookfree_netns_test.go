//go:build netns

package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Addresses of the hook-free path (documentation and benchmarking ranges).
var (
	hfClient   = netip.MustParsePrefix("198.19.0.10/24") // the client's second interface (not bulkPool)
	hfRouterUp = netip.MustParsePrefix("198.19.0.1/24")  // the plain router, client side
	hfRouterDn = netip.MustParsePrefix("198.18.0.1/24")  // the plain router, backend side
)

// hookFreePath gives the client a second way to the same backend
// namespaces that never enters the gateway's namespace, so no packet on it
// meets an edgelb hook (nor conntrack, which edgelb's nat chains switch on
// in the gateway). Its shape is the gateway's: the client's veth to a
// router namespace with no nftables at all, which routes onto a bridge with
// one veth per backend (a second interface, 198.18.0.1x, where a listener
// on the backend's port answers). The same hop count, the same kinds of
// links, the same backend namespaces — only the gateway's hooks are gone.
// The backend listener answers HTTP like the lab's backends (throughput
// runs wrk against it); a connect is timed SYN → SYN/ACK, which the
// backend's kernel answers before any accept.
func (e *env) hookFreePath() target {
	t := e.t
	t.Helper()
	r := netns.NewT(t, "hfr")
	if err := netns.Veth(e.lab.Client, "eth1", r, "up0"); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.lab.Client.AddAddr("eth1", hfClient))
	must(r.AddAddr("up0", hfRouterUp))
	must(r.Bridge("br0"))
	must(r.AddAddr("br0", hfRouterDn))
	must(r.Sysctl("net.ipv4.ip_forward", "1"))
	// With br_netfilter loaded a bridge hands its frames to the IP hooks of
	// its namespace; this router has none, and is told not to look.
	if _, err := r.ReadSysctl("net.bridge.bridge-nf-call-iptables"); err == nil {
		must(r.Sysctl("net.bridge.bridge-nf-call-iptables", "0"))
	}
	must(e.lab.Client.AddRoute(netip.PrefixFrom(hfRouterDn.Masked().Addr(), hfRouterDn.Bits()), hfRouterUp.Addr()))
	var out target
	for i, b := range e.lab.Backends {
		port := fmt.Sprintf("b%d", i+1)
		must(netns.Veth(r, port, b.NS, "eth1"))
		must(r.SetMaster(port, "br0"))
		a := netip.AddrFrom4([4]byte{198, 18, 0, byte(11 + i)})
		must(b.NS.AddAddr("eth1", netip.PrefixFrom(a, 24)))
		must(b.NS.AddRoute(netip.PrefixFrom(hfClient.Masked().Addr(), hfClient.Bits()), hfRouterDn.Addr()))
		ap := netip.AddrPortFrom(a, b.Addr.Port())
		ln, err := b.NS.Listen("tcp", ap.String())
		must(err)
		name := b.Name
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name+"\n")
		})}
		t.Cleanup(func() { srv.Close() })
		go srv.Serve(ln)
		out = append(out, ap)
	}
	// Nothing in the router's namespace hooks a packet.
	if o, err := r.Exec(context.Background(), "nft", "list", "ruleset"); err != nil || strings.TrimSpace(string(o)) != "" {
		t.Fatalf("the hook-free router has a ruleset: %v: %s", err, o)
	}
	return out
}
