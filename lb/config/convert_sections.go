package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// maxConntrackPeak keeps twice the peak within nf_conntrack_max (an int).
const maxConntrackPeak = 1 << 30

func convertDataplane(r *rawDataplane, c *collector) Dataplane {
	d := Dataplane{Mode: ModeAuto, SNAT: true, SetSysctls: true, NodePortRange: DefaultNodePortRange,
		IPVSDevice: DefaultIPVSDevice, AllowEphemeralOverlap: r.AllowEphemeralOverlap, ConntrackPeak: r.ConntrackPeak}
	if r.ConntrackPeak > maxConntrackPeak {
		c.add("dataplane.conntrackPeak", strconv.FormatUint(r.ConntrackPeak, 10), "more than %d connections: the kernel's nf_conntrack_max is a 32-bit count", maxConntrackPeak)
	}
	if r.Mode != "" {
		d.Mode = DataplaneMode(r.Mode)
	}
	d.DrainTimeout = parseDuration(c, "dataplane.drainTimeout", r.DrainTimeout, DefaultDrainTimeout)
	d.ResyncInterval = parseDuration(c, "dataplane.resyncInterval", r.ResyncInterval, DefaultResyncInterval)
	if r.SNAT != nil {
		d.SNAT = *r.SNAT
	}
	if r.SetSysctls != nil {
		d.SetSysctls = *r.SetSysctls
	}
	for i, s := range r.NodeAddresses {
		if a, ok := parseAddr(c, index("dataplane.nodeAddresses", i), s); ok {
			d.NodeAddresses = append(d.NodeAddresses, a)
		}
	}
	if r.NodePortRange != "" {
		pr, err := hostcheck.ParsePortRange(r.NodePortRange)
		if err != nil || strings.ContainsAny(strings.TrimSpace(r.NodePortRange), " \t") {
			c.add("dataplane.nodePortRange", r.NodePortRange, "want FIRST-LAST, like \"30000-32767\"")
		} else {
			d.NodePortRange = pr
		}
	}
	if r.IPVSDevice != "" {
		d.IPVSDevice = r.IPVSDevice
	}
	return d
}

func convertAnnounce(r *rawAnnounce, e env, c *collector) Announce {
	a := Announce{WithdrawOnShutdown: true}
	if r.WithdrawOnShutdown != nil {
		a.WithdrawOnShutdown = *r.WithdrawOnShutdown
	}
	if r.L2 != nil {
		a.L2 = &L2{Interface: r.L2.Interface, SourceInterface: r.L2.SourceInterface}
		for i, s := range r.L2.SourceAddresses {
			if ip, ok := parseAddr(c, index("announce.l2.sourceAddresses", i), s); ok {
				a.L2.SourceAddresses = append(a.L2.SourceAddresses, ip)
			}
		}
		if m := r.L2.Members; m != nil {
			a.L2.Members = convertMembers(m, e, c)
		}
	}
	if r.BGP != nil {
		a.BGP = convertBGP(r.BGP, e, c)
	}
	return a
}

func convertMembers(r *rawMembers, e env, c *collector) *Members {
	const path = "announce.l2.members"
	m := &Members{Name: r.Name, SuspicionMult: DefaultSuspicionMult}
	port := uint16(DefaultMembersPort)
	if r.Port != 0 {
		port = port16(c, path+".port", r.Port, 1)
	}
	bind := netip.IPv4Unspecified()
	if r.BindAddress != "" {
		if a, ok := parseAddr(c, path+".bindAddress", r.BindAddress); ok {
			bind = a
		}
	}
	m.Bind = netip.AddrPortFrom(bind, port)
	if r.Advertise != "" {
		const f = path + ".advertiseAddress"
		if ap, err := netip.ParseAddrPort(r.Advertise); err == nil {
			m.Advertise = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		} else if a, ok := parseAddr(c, f, r.Advertise); ok {
			m.Advertise = netip.AddrPortFrom(a, port)
		}
	}
	for i, j := range r.Join {
		f := index(path+".join", i)
		if ap, err := netip.ParseAddrPort(j); err == nil {
			m.Join = append(m.Join, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		} else if a, ok := parseAddr(c, f, j); ok {
			m.Join = append(m.Join, netip.AddrPortFrom(a, port))
		}
	}
	m.ProbeInterval = parseDuration(c, path+".probeInterval", r.ProbeInterval, DefaultProbeInterval)
	m.ProbeTimeout = parseDuration(c, path+".probeTimeout", r.ProbeTimeout, DefaultProbeTimeout)
	if r.SuspicionMult != nil {
		m.SuspicionMult = intIn(c, path+".suspicionMult", *r.SuspicionMult, 1, 100)
	}
	if r.SecretFile != "" {
		var s string
		m.SecretFile, s = e.secretFile(c, path+".secretFile", r.SecretFile)
		if s != "" {
			k, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				c.add(path+".secretFile", r.SecretFile, "want a base64 key (e.g. from `head -c 32 /dev/urandom | base64`)")
			} else {
				m.Key = Secret(k)
			}
		}
	}
	return m
}

// asn range-checks a 4-byte AS number; the reserved values are validation's.
func asn(c *collector, field string, v int64) uint32 {
	if v <= 0 || v > 1<<32-1 {
		if v == 0 {
			c.add(field, "", "required (1-4294967294)")
		} else {
			c.add(field, fmt.Sprint(v), "AS number out of range 1-4294967294")
		}
		return 0
	}
	return uint32(v)
}

func convertBGP(r *rawBGP, e env, c *collector) *BGP {
	b := &BGP{LocalASN: asn(c, "announce.bgp.localASN", r.LocalASN)}
	if r.RouterID != "" {
		if a, ok := parseAddr(c, "announce.bgp.routerID", r.RouterID); ok {
			b.RouterID = a
		}
	}
	b.ListenPort = port16(c, "announce.bgp.listenPort", r.ListenPort, 0)
	for i := range r.Peers {
		p := &r.Peers[i]
		path := index("announce.bgp.peers", i)
		peer := BGPPeer{Name: p.Name, Port: DefaultBGPPort, Passive: p.Passive, GracefulRestart: p.GracefulRestart}
		if p.Address == "" {
			c.add(path+".address", "", "required")
		} else if a, ok := parseAddr(c, path+".address", p.Address); ok {
			peer.Address = a
		}
		if peer.Name == "" && peer.Address.IsValid() {
			peer.Name = peer.Address.String()
		}
		peer.ASN = asn(c, path+".asn", p.ASN)
		if p.Port != 0 {
			peer.Port = port16(c, path+".port", p.Port, 1)
		}
		if p.SourceAddress != "" {
			if a, ok := parseAddr(c, path+".sourceAddress", p.SourceAddress); ok {
				peer.SourceAddress = a
			}
		}
		peer.MultihopTTL = uint8(intIn(c, path+".multihopTTL", p.MultihopTTL, 0, 255))
		switch {
		case p.Password != "" && p.PasswordFile != "":
			c.add(path+".password", "[redacted]", "set password or passwordFile, not both")
		case p.Password != "":
			peer.Password = Secret(p.Password)
		case p.PasswordFile != "":
			var s string
			peer.PasswordFile, s = e.secretFile(c, path+".passwordFile", p.PasswordFile)
			peer.Password = Secret(s)
		}
		peer.HoldTime = parseDuration(c, path+".holdTime", p.HoldTime, DefaultHoldTime)
		peer.Keepalive = parseDuration(c, path+".keepalive", p.Keepalive, peer.HoldTime/3)
		if f := p.BFD; f != nil && f.Enabled {
			peer.BFD = &BFD{
				ReceiveInterval:  parseDuration(c, path+".bfd.receiveInterval", f.ReceiveInterval, DefaultBFDInterval),
				TransmitInterval: parseDuration(c, path+".bfd.transmitInterval", f.TransmitInterval, DefaultBFDInterval),
				Multiplier:       DefaultBFDMultiplier, Passive: f.Passive,
			}
			if f.Multiplier != 0 {
				peer.BFD.Multiplier = int(f.Multiplier)
			}
		}
		b.Peers = append(b.Peers, peer)
	}
	return b
}

func convertAPI(r *rawAPI, e env, c *collector) API {
	a := API{Listen: netip.MustParseAddrPort(DefaultAPIListen)}
	if r.Listen != "" {
		s := r.Listen
		if strings.HasPrefix(s, ":") {
			s = "[::]" + s // ":8080": every address, as net.Listen reads it
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			c.add("api.listen", r.Listen, "want ADDRESS:PORT, like \"127.0.0.1:8080\", \"[::1]:8080\" or \":8080\"")
		} else {
			a.Listen = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	if r.TokenFile != "" {
		var s string
		a.TokenFile, s = e.secretFile(c, "api.tokenFile", r.TokenFile)
		a.Token = Secret(s)
	}
	a.AnonymousReads = r.AnonymousReads
	a.Tokens = convertTokens(r, e, c)
	if t := r.TLS; t != nil {
		a.TLS = convertTLS(t, e, c)
	}
	switch lf := LiveFlows(r.LiveFlows); lf {
	case "", LiveFlowsOnDemand:
		a.LiveFlows = LiveFlowsOnDemand
	case LiveFlowsAlways:
		a.LiveFlows = lf
	default:
		c.add("api.liveFlows", r.LiveFlows, "want %q or %q", LiveFlowsOnDemand, LiveFlowsAlways)
	}
	return a
}

// convertTokens reads api.tokens: each a unique name, a file holding the
// secret (read like tokenFile: trimmed, empty refused), a role; no two
// tokens with the same secret (the audit trail could not tell them apart).
func convertTokens(r *rawAPI, e env, c *collector) []APIToken {
	var out []APIToken
	names := map[string]int{}
	secrets := map[Secret]string{}
	if r.TokenFile != "" {
		names["default"] = -1
	}
	for i, t := range r.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		tok := APIToken{Name: t.Name, Role: TokenRole(t.Role)}
		switch {
		case t.Name == "":
			c.add(f+".name", "", "required (the identity the audit trail records)")
		case !tokenName(t.Name):
			c.add(f+".name", t.Name, "want letters, digits, '.', '_', '-' (at most 63)")
		default:
			if j, dup := names[t.Name]; dup {
				if j < 0 {
					c.add(f+".name", t.Name, "taken by api.tokenFile's token (named \"default\")")
				} else {
					c.add(f+".name", t.Name, "used twice (also api.tokens[%d])", j)
				}
			}
			names[t.Name] = i
		}
		switch tok.Role {
		case RoleRead, RoleWrite:
		default:
			c.add(f+".role", t.Role, "want read or write")
		}
		if t.File == "" {
			c.add(f+".file", "", "required (a file holding the token)")
		} else {
			var s string
			tok.File, s = e.secretFile(c, f+".file", t.File)
			tok.Secret = Secret(s)
			if other, dup := secrets[tok.Secret]; dup && s != "" {
				c.add(f+".file", t.File, "holds the same token as %s", other)
			}
			if s != "" {
				secrets[tok.Secret] = f
			}
		}
		out = append(out, tok)
	}
	return out
}

func tokenName(s string) bool {
	if len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func convertTLS(r *rawTLS, e env, c *collector) *TLS {
	t := &TLS{CertFile: e.path(r.Cert), KeyFile: e.path(r.Key)}
	var certPEM, keyPEM []byte
	var err error
	if r.Cert == "" {
		c.add("api.tls.cert", "", "required with tls (a PEM certificate chain)")
	} else if certPEM, err = e.readFile(t.CertFile); err != nil {
		c.add("api.tls.cert", r.Cert, "cannot read: %v", err)
	}
	if r.Key == "" {
		c.add("api.tls.key", "", "required with tls (the PEM private key)")
	} else if keyPEM, err = e.readFile(t.KeyFile); err != nil {
		c.add("api.tls.key", r.Key, "cannot read: %v", err)
	}
	if certPEM != nil && keyPEM != nil {
		if t.Certificate, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			c.add("api.tls.cert", r.Cert, "does not load with api.tls.key %q: %v", r.Key, err)
		}
	}
	if r.ClientCA != "" {
		t.ClientCAFile = e.path(r.ClientCA)
		b, err := e.readFile(t.ClientCAFile)
		if err != nil {
			c.add("api.tls.clientCA", r.ClientCA, "cannot read: %v", err)
		} else {
			t.ClientCAs = x509.NewCertPool()
			if !t.ClientCAs.AppendCertsFromPEM(b) {
				c.add("api.tls.clientCA", r.ClientCA, "holds no PEM certificate")
			}
		}
	}
	return t
}

func convertKubernetes(r *rawKubernetes, e env, snat bool, c *collector) Kubernetes {
	k := Kubernetes{Enabled: r.Enabled, HandleClassless: r.HandleClassless, NodeName: r.NodeName,
		LoadBalancerClass: DefaultLoadBalancerClass, LeaseName: DefaultLeaseName, LeaseNamespace: DefaultLeaseNamespace,
		BackendMode: BackendEndpoints, NodePortsOnLoadBalancers: r.NodePortsOnLBs, Method: proxy.NAT}
	var err error
	if k.Scheduler, err = proxy.ParseScheduler(r.Scheduler); err != nil {
		c.add("kubernetes.scheduler", r.Scheduler, "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
		k.Scheduler = proxy.DefaultScheduler
	}
	switch {
	case r.Method != "":
		if k.Method, err = proxy.ParseMethod(r.Method); err != nil {
			c.add("kubernetes.method", r.Method, "want nat or nat-nosnat")
			k.Method = proxy.NAT
		}
	case !snat:
		k.Method = proxy.NATNoSNAT
	}
	if r.Kubeconfig != "" {
		k.Kubeconfig = e.path(r.Kubeconfig)
		if r.Enabled {
			if _, err := e.readFile(k.Kubeconfig); err != nil {
				c.add("kubernetes.kubeconfig", r.Kubeconfig, "cannot read: %v", err)
			}
		}
	}
	if r.LoadBalancerClass != "" {
		k.LoadBalancerClass = r.LoadBalancerClass
	}
	if r.LeaseName != "" {
		k.LeaseName = r.LeaseName
	}
	if r.LeaseNamespace != "" {
		k.LeaseNamespace = r.LeaseNamespace
	}
	if r.BackendMode != "" {
		k.BackendMode = BackendMode(r.BackendMode)
	}
	if h := r.NodeHealthCheck; h != nil {
		// The per-service check's parsing and defaults, restricted to TCP.
		k.NodeHealthCheck = lb.ConvertHealthCheck(&c.Collector, "kubernetes.nodeHealthCheck", &lb.HealthCheckInput{Type: "tcp",
			Interval: h.Interval, Timeout: h.Timeout, Rise: h.Rise, Fall: h.Fall})
	}
	return k
}
