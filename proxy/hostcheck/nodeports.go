package hostcheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/netip"
	"sort"
	"strings"

	"github.com/edgelb/edgelb/proxy"
)

// Finding codes of CheckNodePorts.
const (
	// CodeRangeOverlap (Error): node-port range overlaps unreserved ephemeral ports.
	CodeRangeOverlap = "nodeport-range-ephemeral-overlap"
	// CodeRangeReserved (Info): it overlaps, but every shared port is reserved.
	CodeRangeReserved = "nodeport-range-reserved"
	// CodeRangeClear (Info): no overlap (the message says adjacent or disjoint).
	CodeRangeClear = "nodeport-range-clear"
	// CodeNodePortEphemeral (Warn): a configured node port is an unreserved ephemeral port.
	CodeNodePortEphemeral = "nodeport-in-ephemeral-range"
	// CodeListenerNodePort (Warn): a local socket listens on a node port.
	CodeListenerNodePort = "listener-on-nodeport"
	// CodeListenerVIPPort (Warn): a local socket listens on a VIP's port.
	CodeListenerVIPPort = "listener-on-vip-port"
	// CodeOutboundNodePort (Warn): outbound connections use a node port as source port.
	CodeOutboundNodePort = "outbound-on-nodeport"
	// CodeOutboundInRange (Info): outbound connections use ports of the node-port range.
	CodeOutboundInRange = "outbound-in-nodeport-range"
	// CodeSocketsUnreadable (Warn): a /proc/net socket table could not be read.
	CodeSocketsUnreadable = "sockets-unreadable"
)

const (
	sysctlPortRange     = "net.ipv4.ip_local_port_range"
	sysctlReservedPorts = "net.ipv4.ip_local_reserved_ports"
	// ReservedPortsFile is the sysctl.d file the printed fix writes; 99- so it
	// is applied after any other file that sets the same (whole-list) value.
	ReservedPortsFile = "/etc/sysctl.d/99-edgelb-reserved-ports.conf"
)

// NodePort is a configured node port and who owns it (for messages).
type NodePort struct {
	Port     uint16
	Protocol proxy.Protocol
	Service  string
}

// VIPPort is a configured VIP:port and who owns it.
type VIPPort struct {
	VIP      netip.Addr
	Port     uint16
	Protocol proxy.Protocol
	Service  string
}

// NodePortInput is what CheckNodePorts compares the namespace against.
type NodePortInput struct {
	Range     PortRange
	NodePorts []NodePort
	VIPPorts  []VIPPort
	// NodeAddrs are the addresses node ports are served on; empty means every
	// address of the gateway (then any non-loopback listener counts).
	NodeAddrs []netip.Addr
}

// Ephemeral is the kernel's choice of local ports for outgoing connections.
type Ephemeral struct {
	Range    PortRange
	Reserved []PortRange
}

// ReadEphemeral reads ip_local_port_range and ip_local_reserved_ports.
func ReadEphemeral(src Source) (Ephemeral, error) {
	v, err := ReadSysctl(src, sysctlPortRange)
	if err != nil {
		return Ephemeral{}, err
	}
	r, err := ParsePortRange(v)
	if err != nil {
		return Ephemeral{}, fmt.Errorf("sysctl %s: %w", sysctlPortRange, err)
	}
	e := Ephemeral{Range: r}
	v, err = ReadSysctl(src, sysctlReservedPorts)
	if err != nil {
		return Ephemeral{}, err
	}
	if e.Reserved, err = ParsePortList(v); err != nil {
		return Ephemeral{}, fmt.Errorf("sysctl %s: %w", sysctlReservedPorts, err)
	}
	return e, nil
}

// Relation is how the node-port range sits against the ephemeral ports.
type Relation struct {
	NodePorts PortRange
	Ephemeral Ephemeral
	// Overlap is node-port range ∩ ephemeral range.
	Overlap []PortRange
	// Unreserved is the part of Overlap not in the reserved list: the ports
	// the kernel may hand to outgoing connections.
	Unreserved []PortRange
	// Adjacent: no overlap, and the ranges touch (30000-32767 vs 32768-60999).
	Adjacent bool
	// MergedReserved is the reserved list with the node-port range merged in,
	// coalesced: the value the fix writes (the sysctl replaces the whole list).
	MergedReserved []PortRange
}

// Relate computes the relation; it is pure.
func Relate(nodePorts PortRange, e Ephemeral) Relation {
	r := Relation{NodePorts: nodePorts, Ephemeral: e}
	r.Overlap = Intersect(nodePorts, []PortRange{e.Range})
	r.Unreserved = Subtract(r.Overlap, e.Reserved)
	r.Adjacent = len(r.Overlap) == 0 && nodePorts.Adjacent(e.Range)
	r.MergedReserved = Coalesce(append(append([]PortRange(nil), e.Reserved...), nodePorts))
	return r
}

// Fix is the shell that reserves the node-port range without dropping the
// ports already reserved.
func (r Relation) Fix() string {
	v := FormatPortList(r.MergedReserved)
	return fmt.Sprintf("sysctl -w %s=%s\necho '%s = %s' > %s", sysctlReservedPorts, v, sysctlReservedPorts, v, ReservedPortsFile)
}

// Findings turns the relation into (1)-(3) and (6) of the node-port checks.
func (r Relation) Findings(nodePorts []NodePort) []Finding {
	reserved := FormatPortList(r.Ephemeral.Reserved)
	if reserved == "" {
		reserved = "(empty)"
	}
	switch {
	case len(r.Overlap) == 0:
		how := "disjoint"
		if r.Adjacent {
			how = "adjacent, no overlap"
		}
		return []Finding{{Severity: Info, Code: CodeRangeClear, Message: fmt.Sprintf(
			"node-port range %q and ephemeral port range %q (%s) are %s",
			r.NodePorts.String(), r.Ephemeral.Range.String(), sysctlPortRange, how)}}
	case len(r.Unreserved) == 0:
		return []Finding{{Severity: Info, Code: CodeRangeReserved, Message: fmt.Sprintf(
			"node-port range %q overlaps ephemeral port range %q (%s) at %q, all of it reserved by %s %q",
			r.NodePorts.String(), r.Ephemeral.Range.String(), sysctlPortRange, FormatPortList(r.Overlap),
			sysctlReservedPorts, reserved)}}
	}
	out := []Finding{{Severity: Error, Code: CodeRangeOverlap, Message: fmt.Sprintf(
		"node-port range %q overlaps ephemeral port range %q (%s) at %q, not reserved by %s %q: "+
			"the kernel may use these as source ports of the gateway's own connections, and a node-port "+
			"service on the same port would capture their replies",
		r.NodePorts.String(), r.Ephemeral.Range.String(), sysctlPortRange, FormatPortList(r.Unreserved),
		sysctlReservedPorts, reserved), Fix: r.Fix()}}
	for _, np := range sortedNodePorts(nodePorts) {
		if listContains(r.Unreserved, np.Port) {
			out = append(out, Finding{Severity: Warn, Code: CodeNodePortEphemeral, Message: fmt.Sprintf(
				"node port %d/%s%s is inside the unreserved ephemeral ports %q",
				np.Port, np.Protocol, owner(np.Service), FormatPortList(r.Unreserved))})
		}
	}
	return out
}

// CheckNodePorts runs the node-port checks against the namespace src
// describes. The error is for a namespace it cannot read at all (the two
// port sysctls); an unreadable socket table is a Warn finding instead.
func CheckNodePorts(src Source, in NodePortInput) ([]Finding, error) {
	e, err := ReadEphemeral(src)
	if err != nil {
		return nil, fmt.Errorf("node-port check: %w", err)
	}
	rel := Relate(in.Range, e)
	out := rel.Findings(in.NodePorts)
	socks, sf := ReadSockets(src)
	out = append(out, sf...)
	out = append(out, SocketFindings(socks, in)...)
	return out, nil
}

// ReadSockets reads every socket table there is; a missing table (no IPv6)
// is skipped, an unreadable one becomes a finding.
func ReadSockets(src Source) ([]Socket, []Finding) {
	var socks []Socket
	var out []Finding
	for _, t := range []struct {
		file  string
		proto proxy.Protocol
	}{{"tcp", proxy.TCP}, {"tcp6", proxy.TCP}, {"udp", proxy.UDP}, {"udp6", proxy.UDP}} {
		b, err := fs.ReadFile(src.Net, t.file)
		if isNotExist(err) {
			continue
		}
		if err == nil {
			var s []Socket
			if s, err = ParseSockets(bytes.NewReader(b), t.proto); err == nil {
				socks = append(socks, s...)
				continue
			}
		}
		out = append(out, Finding{Severity: Warn, Code: CodeSocketsUnreadable,
			Message: fmt.Sprintf("cannot check local sockets in /proc/net/%s: %v", t.file, err)})
	}
	return socks, out
}

// SocketFindings is checks (4) and (5) over a parsed socket list.
func SocketFindings(socks []Socket, in NodePortInput) []Finding {
	var out []Finding
	type pp struct {
		port  uint16
		proto proxy.Protocol
	}
	listening := map[pp]bool{}
	for _, s := range socks {
		if s.Listening() {
			listening[pp{s.Local.Port(), s.Protocol}] = true
		}
	}
	nodePorts := sortedNodePorts(in.NodePorts)
	// (4) listeners the node-port DNAT would hide.
	for _, np := range nodePorts {
		for _, s := range socks {
			if s.Listening() && s.Protocol == np.Protocol && s.Local.Port() == np.Port && coversNode(s.Local.Addr(), in.NodeAddrs) {
				out = append(out, Finding{Severity: Warn, Code: CodeListenerNodePort, Message: fmt.Sprintf(
					"%s listener on %s (uid %d, inode %d) sits on node port %d%s: the node-port DNAT takes "+
						"that port's traffic, so the listener stops receiving it", s.Protocol, s.Local, s.UID, s.Inode,
					np.Port, owner(np.Service))})
			}
		}
	}
	vips := append([]VIPPort(nil), in.VIPPorts...)
	sort.SliceStable(vips, func(i, j int) bool {
		if c := vips[i].VIP.Compare(vips[j].VIP); c != 0 {
			return c < 0
		}
		return vips[i].Port < vips[j].Port
	})
	for _, v := range vips {
		if !v.VIP.IsValid() {
			continue
		}
		for _, s := range socks {
			if s.Listening() && s.Protocol == v.Protocol && s.Local.Port() == v.Port && covers(s.Local.Addr(), v.VIP) {
				out = append(out, Finding{Severity: Warn, Code: CodeListenerVIPPort, Message: fmt.Sprintf(
					"%s listener on %s (uid %d, inode %d) sits on %s/%s%s: the VIP's DNAT takes that traffic, "+
						"so the listener never sees it", s.Protocol, s.Local, s.UID, s.Inode,
					netip.AddrPortFrom(v.VIP, v.Port), v.Protocol, owner(v.Service))})
			}
		}
	}
	// (5) outbound connections whose source port is a node port. A connected
	// socket on a port with a listener is an accepted inbound one: skip it.
	configured := map[pp]NodePort{}
	for _, np := range nodePorts {
		configured[pp{np.Port, np.Protocol}] = np
	}
	perPort := map[pp][]Socket{}
	var inRange int
	for _, s := range socks {
		k := pp{s.Local.Port(), s.Protocol}
		if !s.Connected() || listening[k] {
			continue
		}
		if _, ok := configured[k]; ok {
			perPort[k] = append(perPort[k], s)
		} else if in.Range.Contains(k.port) {
			inRange++
		}
	}
	for _, np := range nodePorts {
		k := pp{np.Port, np.Protocol}
		conns := perPort[k]
		if len(conns) == 0 {
			continue
		}
		delete(perPort, k) // a node port listed twice is reported once
		ex := make([]string, 0, 3)
		for i, s := range conns {
			if i == 3 {
				ex = append(ex, "...")
				break
			}
			ex = append(ex, s.Local.String()+"->"+s.Remote.String())
		}
		out = append(out, Finding{Severity: Warn, Code: CodeOutboundNodePort, Message: fmt.Sprintf(
			"%d established outbound %s connection(s) use node port %d%s as their local port (%s): their "+
				"replies collide with the node-port service", len(conns), np.Protocol, np.Port, owner(np.Service),
			strings.Join(ex, ", "))})
	}
	if inRange > 0 {
		out = append(out, Finding{Severity: Info, Code: CodeOutboundInRange, Message: fmt.Sprintf(
			"%d established outbound connection(s) use local ports inside the node-port range %q",
			inRange, in.Range.String())})
	}
	return out
}

// covers reports whether a socket bound to local receives traffic for a.
// An IPv6 wildcard may be dual-stack (v6only is not in /proc): count it.
func covers(local, a netip.Addr) bool {
	local, a = local.Unmap(), a.Unmap()
	if local.IsUnspecified() {
		return local.Is6() || a.Is4()
	}
	return local == a
}

func coversNode(local netip.Addr, nodeAddrs []netip.Addr) bool {
	if len(nodeAddrs) == 0 {
		return !local.Unmap().IsLoopback()
	}
	for _, a := range nodeAddrs {
		if covers(local, a) {
			return true
		}
	}
	return false
}

func sortedNodePorts(in []NodePort) []NodePort {
	s := append([]NodePort(nil), in...)
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Port != s[j].Port {
			return s[i].Port < s[j].Port
		}
		return s[i].Protocol < s[j].Protocol
	})
	return s
}

func owner(service string) string {
	if service == "" {
		return ""
	}
	return fmt.Sprintf(" of service %q", service)
}
