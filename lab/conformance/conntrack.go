package conformance

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// CTEntry is one conntrack entry of the gateway, reduced to what the suite
// checks.
type CTEntry struct {
	Proto    uint8
	Client   netip.AddrPort // original source
	Frontend netip.AddrPort // original destination (VIP:port or node:nodeport)
	Backend  netip.AddrPort // reply source: where the connection went
	ReplyDst netip.AddrPort // reply destination: the client, or the gateway when masqueraded
	Mark     uint32
}

// Conntrack lists the gateway's conntrack entries whose original
// destination is frontend, over ctnetlink (no conntrack tool needed).
func (topo *Topology) Conntrack(frontend netip.AddrPort) ([]CTEntry, error) {
	h, err := netlink.NewHandleAt(topo.Gateway.Handle(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("ctnetlink in %s: %w", topo.Gateway.Name, err)
	}
	defer h.Close()
	fam := netlink.InetFamily(netlink.FAMILY_V4)
	if frontend.Addr().Is6() {
		fam = netlink.FAMILY_V6
	}
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, fam)
	if err != nil {
		return nil, fmt.Errorf("list conntrack in %s: %w", topo.Gateway.Name, err)
	}
	var out []CTEntry
	for _, f := range flows {
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		if netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort) != frontend {
			continue
		}
		src, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		rsrc, _ := netip.AddrFromSlice(f.Reverse.SrcIP)
		rdst, _ := netip.AddrFromSlice(f.Reverse.DstIP)
		out = append(out, CTEntry{
			Proto:    f.Forward.Protocol,
			Client:   netip.AddrPortFrom(src.Unmap(), f.Forward.SrcPort),
			Frontend: frontend,
			Backend:  netip.AddrPortFrom(rsrc.Unmap(), f.Reverse.SrcPort),
			ReplyDst: netip.AddrPortFrom(rdst.Unmap(), f.Reverse.DstPort),
			Mark:     f.Mark,
		})
	}
	return out, nil
}

// marked reports whether a conntrack mark carries edgelb's mark.
func marked(m uint32) bool { return m&proxy.CTMarkMask == proxy.CTMark&proxy.CTMarkMask }
