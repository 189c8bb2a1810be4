package hostcheck

import (
	"fmt"
	"strings"
)

// Sysctl is a kernel setting edgelb wants, and why.
type Sysctl struct {
	Name string // dotted: "net.ipv4.vs.conntrack"
	Want string
	Why  string
	// Optional: absent is fine (net.ipv6.* on a host without IPv6).
	Optional bool
}

// Module is the kernel module whose loading creates the setting ("" for
// the core ones): such a setting is absent, not wrong, until it is loaded.
func (s Sysctl) Module() string {
	switch {
	case strings.HasPrefix(s.Name, "net.ipv4.vs."):
		return "ip_vs"
	case strings.HasPrefix(s.Name, "net.netfilter.nf_conntrack_"):
		return "nf_conntrack"
	}
	return ""
}

// Each dataplane's settings: the one list the dataplane writes at its start
// and every resync when dataplane.setSysctls is on (proxy/sysctl.Ensure),
// CheckSysctls reports and systemd/sysctl.d/90-edgelb.conf ships.
var (
	// beLiberal is in both: a segment outside the TCP window (a late
	// retransmission, reordering under load) is invalid to strict window
	// tracking, and NAT skips invalid packets, so a backend's segment reaches
	// the gateway untranslated and the RST that answers it resets the
	// connection (kubernetes#74839). Liberal tracking keeps it in its
	// connection, where the endpoints' TCP drops it.
	beLiberal  = Sysctl{"net.netfilter.nf_conntrack_tcp_be_liberal", "1", "a TCP segment outside the window stays in its connection instead of reaching the gateway untranslated and resetting it", false}
	ipForward  = Sysctl{"net.ipv4.ip_forward", "1", "the gateway forwards client traffic to the backends", false}
	ip6Forward = Sysctl{"net.ipv6.conf.all.forwarding", "1", "the gateway forwards IPv6 client traffic to the backends", true}

	NFTablesSysctls = []Sysctl{ipForward, ip6Forward, beLiberal}
	IPVSSysctls     = []Sysctl{
		{"net.ipv4.vs.conntrack", "1", "IPVS connections must have conntrack entries so the nftables SNAT applies to them", false},
		{"net.ipv4.vs.expire_nodest_conn", "1", "connections to a deleted real server are dropped at once instead of hanging", false},
		{"net.ipv4.vs.expire_quiescent_template", "1", "affinity templates of a weight-0 (draining) server expire, so clients move on", false},
		ipForward,
		{"net.ipv4.conf.all.arp_ignore", "1", "the kernel answers ARP only for addresses on the receiving interface, not for VIPs on the IPVS device", false},
		{"net.ipv4.conf.all.arp_announce", "2", "ARP requests use the best local source address, never a VIP", false},
		beLiberal,
	}
)

// Finding codes of CheckSysctls.
const (
	CodeIPVSAbsent  = "ipvs-absent"
	CodeSysctlOK    = "sysctl-ok"
	CodeSysctlWrong = "sysctl-mismatch"
	CodeSysctlGone  = "sysctl-missing"
)

// CheckSysctls reports each setting of want (a dataplane's list, named by
// dataplane): Info when it holds the wanted value, Warn (with the fix) when
// not. Some only exist once their module is loaded: the absence of
// net.ipv4.vs.* (ip_vs) is one Info finding; that of net.netfilter.*
// (nf_conntrack, which the dataplane loads with its rules and then sets
// them) is CheckConntrack's. An absent Optional setting is skipped.
func CheckSysctls(src Source, dataplane string, want []Sysctl) []Finding {
	var out []Finding
	vsAbsent := false
	for _, s := range want {
		got, err := ReadSysctl(src, s.Name)
		if err != nil && isNotExist(err) {
			switch {
			case s.Module() == "ip_vs":
				if !vsAbsent {
					vsAbsent = true
					out = append(out, Finding{Severity: Info, Code: CodeIPVSAbsent,
						Message: "net.ipv4.vs.* sysctls are absent: the ip_vs module is not loaded (or the kernel has no IPVS)",
						Fix:     "modprobe ip_vs"})
				}
				continue
			case s.Module() == "nf_conntrack", s.Optional:
				continue
			}
		}
		switch {
		case err != nil:
			out = append(out, Finding{Severity: Warn, Code: CodeSysctlGone, Message: fmt.Sprintf("cannot read %s: %v", s.Name, err)})
		case got == s.Want:
			out = append(out, Finding{Severity: Info, Code: CodeSysctlOK, Message: fmt.Sprintf("%s = %s", s.Name, got)})
		default:
			out = append(out, Finding{Severity: Warn, Code: CodeSysctlWrong,
				Message: fmt.Sprintf("%s is %q, %s wants %q: %s", s.Name, got, dataplane, s.Want, s.Why),
				Fix:     fmt.Sprintf("sysctl -w %s=%s", s.Name, s.Want)})
		}
	}
	return out
}
