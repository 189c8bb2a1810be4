package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func (c *Config) validateAnnounce(col *collector) {
	if l2 := c.Announce.L2; l2 != nil {
		if err := checkIfName(l2.Interface); err != nil {
			col.addErr("announce.l2.interface", l2.Interface, err)
		}
		if m := l2.Members; m != nil {
			validateMembers(col, m)
		}
	}
	if b := c.Announce.BGP; b != nil {
		validateBGP(col, b)
	}
}

// checkIfName applies the kernel's rules for interface names (IFNAMSIZ).
func checkIfName(s string) error {
	if s == "" {
		return fmt.Errorf("required (the interface VIPs are announced on)")
	}
	return lb.CheckInterfaceName(s)
}

func validateMembers(col *collector, m *Members) {
	const path = "announce.l2.members"
	if !m.Bind.Addr().IsValid() || m.Bind.Addr().IsMulticast() {
		col.add(path+".bindAddress", m.Bind.Addr().String(), "not a local address")
	}
	if m.Bind.Port() == 0 {
		col.add(path+".port", "0", "port out of range 1-65535")
	}
	if a := m.Advertise; a.IsValid() && (a.Addr().IsUnspecified() || a.Addr().IsMulticast() || a.Port() == 0) {
		col.add(path+".advertiseAddress", a.String(), "want an address other members can reach")
	}
	seen := map[netip.AddrPort]int{}
	for i, j := range m.Join {
		f := index(path+".join", i)
		switch {
		case !j.Addr().IsValid() || j.Addr().IsUnspecified() || j.Addr().IsMulticast() || j.Port() == 0:
			col.add(f, j.String(), "want a member's ADDRESS or ADDRESS:PORT")
		default:
			if k, dup := seen[j]; dup {
				col.add(f, j.String(), "listed twice (also join[%d])", k)
			}
			seen[j] = i
		}
	}
	if m.ProbeInterval <= 0 {
		col.add(path+".probeInterval", m.ProbeInterval.String(), "must be more than 0")
	}
	if m.ProbeTimeout <= 0 {
		col.add(path+".probeTimeout", m.ProbeTimeout.String(), "must be more than 0")
	} else if m.ProbeInterval > 0 && m.ProbeTimeout >= m.ProbeInterval {
		col.add(path+".probeTimeout", m.ProbeTimeout.String(), "must be shorter than probeInterval %s", m.ProbeInterval)
	}
	if m.SuspicionMult < 1 {
		col.add(path+".suspicionMult", fmt.Sprint(m.SuspicionMult), "must be at least 1")
	}
	if n := len(m.Key); n != 0 && n != 16 && n != 24 && n != 32 {
		col.add(path+".secretFile", m.SecretFile, "key is %d bytes; memberlist wants 16, 24 or 32 (AES-128/192/256)", n)
	}
}

// checkASN refuses AS numbers that must not be used on a session: 0, the
// 2-byte transition AS 23456 (RFC 6793) and the last of each range (RFC 7300).
func checkASN(n uint32) error {
	switch n {
	case 0:
		return fmt.Errorf("required (1-4294967294)")
	case 23456:
		return fmt.Errorf("AS 23456 is AS_TRANS, reserved for 4-byte AS transition")
	case 65535, 4294967295:
		return fmt.Errorf("AS %d is reserved (RFC 7300)", n)
	}
	return nil
}

func validateBGP(col *collector, b *BGP) {
	const path = "announce.bgp"
	if err := checkASN(b.LocalASN); err != nil {
		col.addErr(path+".localASN", asnValue(b.LocalASN), err)
	}
	if id := b.RouterID; id.IsValid() {
		switch {
		case !id.Is4():
			col.add(path+".routerID", id.String(), "a router ID is an IPv4 address (a 32-bit number written as one)")
		case id.IsUnspecified() || id.IsMulticast() || id == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			col.add(path+".routerID", id.String(), "not a usable router ID")
		}
	}
	if len(b.Peers) == 0 && !col.failed(path+".peers") {
		col.add(path+".peers", "", "bgp needs at least one peer")
	}
	seen := map[netip.Addr]int{}
	for i := range b.Peers {
		p := &b.Peers[i]
		f := index(path+".peers", i)
		if a := p.Address; !col.failed(f + ".address") {
			switch {
			case !a.IsValid() || a.IsUnspecified() || a.IsMulticast():
				col.add(f+".address", a.String(), "not a usable peer address")
			default:
				if j, dup := seen[a]; dup {
					col.add(f+".address", a.String(), "peer listed twice (also peers[%d])", j)
				}
				seen[a] = i
			}
		}
		if err := checkASN(p.ASN); err != nil {
			col.addErr(f+".asn", asnValue(p.ASN), err)
		}
		if p.Port == 0 {
			col.add(f+".port", "0", "port out of range 1-65535")
		}
		if s := p.SourceAddress; s.IsValid() && p.Address.IsValid() && s.Is4() != p.Address.Is4() {
			col.add(f+".sourceAddress", s.String(), "not the same family as the peer address %s", p.Address)
		}
		if p.MultihopTTL > 0 && p.ASN == b.LocalASN && p.ASN != 0 {
			col.add(f+".multihopTTL", fmt.Sprint(p.MultihopTTL), "only applies to eBGP; this is an iBGP peer (asn = localASN)")
		}
		if len(p.Password) > 80 {
			col.add(f+".password", "[redacted]", "TCP MD5 keys are at most 80 bytes (got %d)", len(p.Password))
		}
		validateTimers(col, f, p.HoldTime, p.Keepalive)
		if d := p.BFD; d != nil {
			// bfdd's limits; a multihop session (RFC 5883) is keyed by both ends.
			for _, iv := range []struct {
				name string
				v    time.Duration
			}{{"receiveInterval", d.ReceiveInterval}, {"transmitInterval", d.TransmitInterval}} {
				if iv.v < 10*time.Millisecond || iv.v > time.Minute || iv.v%time.Millisecond != 0 {
					col.add(f+".bfd."+iv.name, iv.v.String(), "want whole milliseconds from 10ms to 60s")
				}
			}
			if d.Multiplier < 2 || d.Multiplier > 255 {
				col.add(f+".bfd.multiplier", fmt.Sprint(d.Multiplier), "want 2-255")
			}
			if p.MultihopTTL > 1 && !p.SourceAddress.IsValid() {
				col.add(f+".bfd.enabled", "true", "multihop BFD (RFC 5883) needs the peer's sourceAddress set")
			}
		}
		if p.Passive && b.ListenPort == 0 {
			col.add(f+".passive", "true", "a passive peer must connect to us: set announce.bgp.listenPort")
		}
	}
}

func asnValue(n uint32) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

// validateTimers applies RFC 4271 §4.2/§10: 3s-65535s in whole seconds,
// keepalive below the hold time. Hold time 0 (RFC 4271: no keepalives, a
// dead peer never detected) is refused: GoBGP cannot offer it (it offers
// 90 s instead), and a session that never times out keeps a dead gateway's
// routes forever.
func validateTimers(col *collector, path string, hold, keep time.Duration) {
	if hold == 0 {
		col.add(path+".holdTime", hold.String(), "hold time 0 (no keepalives, a dead peer never detected) is not supported: want whole seconds from 3s to 65535s (leave it out for 90s)")
		return
	}
	if hold%time.Second != 0 || hold < 3*time.Second || hold > 65535*time.Second {
		col.add(path+".holdTime", hold.String(), "want whole seconds from 3s to 65535s")
		return
	}
	if keep%time.Second != 0 || keep < 0 {
		col.add(path+".keepalive", keep.String(), "want whole seconds")
		return
	}
	if keep == 0 || keep >= hold {
		col.add(path+".keepalive", keep.String(), "must be at least 1s and shorter than holdTime %s", hold)
	}
}

func (c *Config) validateDataplane(col *collector) {
	d := &c.Dataplane
	switch d.Mode {
	case ModeAuto, ModeNFTables, ModeIPVS:
	default:
		col.add("dataplane.mode", string(d.Mode), "want auto, nftables or ipvs")
	}
	if d.DrainTimeout < 0 {
		col.add("dataplane.drainTimeout", d.DrainTimeout.String(), "must not be negative")
	}
	if d.ResyncInterval < time.Second {
		col.add("dataplane.resyncInterval", d.ResyncInterval.String(), "must be at least 1s")
	}
	if r := d.NodePortRange; r.First == 0 || r.Last < r.First {
		col.add("dataplane.nodePortRange", r.String(), "want FIRST-LAST within 1-65535")
	}
	seen := map[netip.Addr]int{}
	for i, a := range d.NodeAddresses {
		f := index("dataplane.nodeAddresses", i)
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			col.add(f, a.String(), "not a usable node address (leave nodeAddresses empty for all of the gateway's addresses)")
			continue
		}
		if j, dup := seen[a]; dup {
			col.add(f, a.String(), "listed twice (also nodeAddresses[%d])", j)
		}
		seen[a] = i
	}
	if err := checkIfName(d.IPVSDevice); err != nil {
		col.addErr("dataplane.ipvsDevice", d.IPVSDevice, err)
	}
}

func (c *Config) validateAPI(col *collector) {
	a := &c.API
	if !a.Listen.Addr().IsValid() || a.Listen.Port() == 0 {
		col.add("api.listen", a.Listen.String(), "want ADDRESS:PORT with a port above 0")
	}
	if a.TokenFile != "" && a.Token == "" && !col.failed("api.tokenFile") {
		col.add("api.tokenFile", a.TokenFile, "file is empty")
	}
	if t := a.TLS; t != nil && len(t.Certificate.Certificate) == 0 && !col.failed("api.tls") {
		col.add("api.tls.cert", t.CertFile, "no certificate loaded")
	}
}

func (c *Config) validateKubernetes(col *collector) {
	k := &c.Kubernetes
	switch k.BackendMode {
	case BackendEndpoints, BackendNodePort:
	default:
		col.add("kubernetes.backendMode", string(k.BackendMode), "want endpoints or nodeport")
	}
	if err := checkQualifiedName(k.LoadBalancerClass); err != nil {
		col.addErr("kubernetes.loadBalancerClass", k.LoadBalancerClass, err)
	}
	if !dnsSubdomain(k.LeaseName) {
		col.add("kubernetes.leaseName", k.LeaseName, "want a DNS subdomain name (lower-case letters, digits, '-', '.')")
	}
	if !dnsLabel(k.LeaseNamespace) {
		col.add("kubernetes.leaseNamespace", k.LeaseNamespace, "want a DNS label (lower-case letters, digits, '-'; at most 63)")
	}
	if _, err := proxy.ParseScheduler(string(k.Scheduler)); err != nil || k.Scheduler == "" {
		col.add("kubernetes.scheduler", string(k.Scheduler), "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
	}
	if k.Method != proxy.NAT && k.Method != proxy.NATNoSNAT {
		col.add("kubernetes.method", string(k.Method), "want nat or nat-nosnat: Kubernetes Services map port to targetPort, which dr and tunnel cannot")
	}
	if k.NodeName != "" && !dnsSubdomain(k.NodeName) {
		col.add("kubernetes.nodeName", k.NodeName, "want a Node name (a DNS subdomain)")
	}
	if h := k.NodeHealthCheck; h != nil {
		if k.BackendMode != BackendNodePort {
			col.add("kubernetes.nodeHealthCheck", string(k.BackendMode),
				"needs backendMode nodeport (with endpoints, Kubernetes readiness already decides which pods get traffic)")
		}
		if h.Type != "tcp" {
			col.add("kubernetes.nodeHealthCheck.type", h.Type, "node checks are TCP connects")
		}
		lb.CheckHealth(&col.Collector, "kubernetes.nodeHealthCheck", h)
	}
}

// checkQualifiedName is Kubernetes' rule for loadBalancerClass: a label-style
// "prefix/name" where the prefix is a DNS subdomain.
func checkQualifiedName(s string) error {
	prefix, name, ok := strings.Cut(s, "/")
	if !ok || !dnsSubdomain(prefix) {
		return fmt.Errorf("want PREFIX/NAME with a DNS-subdomain prefix, like edgelb.io/lb")
	}
	if name == "" || len(name) > 63 {
		return fmt.Errorf("the name after / must be 1-63 characters")
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || i == len(name)-1 || r != '-' && r != '_' && r != '.') {
			return fmt.Errorf("the name after / must be alphanumeric with '-', '_' or '.' inside")
		}
	}
	return nil
}

func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i != 0 && i != len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

func dnsSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l) {
			return false
		}
	}
	return true
}
