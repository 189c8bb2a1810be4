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
}

// IPVSSysctls are the settings the IPVS dataplane needs: the one list the
// dataplane writes at start (proxy/ipvs setSysctls), CheckIPVSSysctls
// reports and systemd/sysctl.d ships.
var IPVSSysctls = []Sysctl{
	{"net.ipv4.vs.conntrack", "1", "IPVS connections must have conntrack entries so the nftables SNAT applies to them"},
	{"net.ipv4.vs.expire_nodest_conn", "1", "connections to a deleted real server are dropped at once instead of hanging"},
	{"net.ipv4.vs.expire_quiescent_template", "1", "affinity templates of a weight-0 (draining) server expire, so clients move on"},
	{"net.ipv4.ip_forward", "1", "the gateway forwards client traffic to the backends"},
	{"net.ipv4.conf.all.arp_ignore", "1", "the kernel answers ARP only for addresses on the receiving interface, not for VIPs on the IPVS device"},
	{"net.ipv4.conf.all.arp_announce", "2", "ARP requests use the best local source address, never a VIP"},
	{"net.netfilter.nf_conntrack_tcp_be_liberal", "1", "a TCP segment outside the window stays in its connection instead of reaching the gateway untranslated and resetting it"},
}

// Finding codes of CheckIPVSSysctls.
const (
	CodeIPVSAbsent  = "ipvs-absent"
	CodeSysctlOK    = "sysctl-ok"
	CodeSysctlWrong = "sysctl-mismatch"
	CodeSysctlGone  = "sysctl-missing"
)

// CheckIPVSSysctls reports each of IPVSSysctls: Info when it holds the
// wanted value, Warn (with the fix) when not. net.ipv4.vs.* only exist once
// the ip_vs module is loaded: their absence is one Info finding.
func CheckIPVSSysctls(src Source) []Finding {
	var out []Finding
	vsAbsent := false
	for _, s := range IPVSSysctls {
		got, err := ReadSysctl(src, s.Name)
		isVS := strings.HasPrefix(s.Name, "net.ipv4.vs.")
		switch {
		case err != nil && isNotExist(err) && isVS:
			if !vsAbsent {
				vsAbsent = true
				out = append(out, Finding{Severity: Info, Code: CodeIPVSAbsent,
					Message: "net.ipv4.vs.* sysctls are absent: the ip_vs module is not loaded (or the kernel has no IPVS)",
					Fix:     "modprobe ip_vs"})
			}
		case err != nil:
			out = append(out, Finding{Severity: Warn, Code: CodeSysctlGone, Message: fmt.Sprintf("cannot read %s: %v", s.Name, err)})
		case got == s.Want:
			out = append(out, Finding{Severity: Info, Code: CodeSysctlOK, Message: fmt.Sprintf("%s = %s", s.Name, got)})
		default:
			out = append(out, Finding{Severity: Warn, Code: CodeSysctlWrong,
				Message: fmt.Sprintf("%s is %q, IPVS wants %q: %s", s.Name, got, s.Want, s.Why),
				Fix:     fmt.Sprintf("sysctl -w %s=%s", s.Name, s.Want)})
		}
	}
	return out
}
