// Package config reads edgelb's YAML config file once, strictly (an unknown
// field is an error), into typed values: netip addresses, lb.Pool,
// lb.ServiceSpec, time.Duration, proxy.Scheduler. Every problem in a file is
// reported at once, each naming its field path and quoting the bad value
// (*Errors). Files the config points at (token, BGP passwords, TLS
// material) are read while parsing, so `edgelb check` catches them too.
//
// The reference for every field is README.md in this directory.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// Config is a parsed, validated config file.
type Config struct {
	// File is the path Load read ("" for Parse): the engine names it when
	// it refuses a REST write to a pool or service from the file (409).
	File string
	// Pools and Services are in file order (pools[i] is Pools[i]).
	Pools      []lb.Pool
	Services   []lb.ServiceSpec
	Announce   Announce
	Dataplane  Dataplane
	API        API
	Kubernetes Kubernetes
	State      State
	Health     Health
	Log        Log
	// StateSync copies connection state to the other gateways (stateSync.go).
	StateSync StateSync

	// wroteVIP[i]: services[i] wrote its VIP as vip: (errors name "vip").
	wroteVIP []bool
	// AllocationOrder is how addresses are picked inside a pool
	// (allocation.order): lowest free (default, MetalLB's) or rotate.
	AllocationOrder lb.AllocOrder
}

// Secret is a string that prints as [redacted] (%v, %s, %+v, JSON), so a
// config dumped to a log never leaks a token or password. string(s) reveals it.
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString keeps %#v from printing it.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// MarshalText keeps JSON and YAML encoders from printing it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Announce is how VIPs are made reachable.
type Announce struct {
	// L2 answers ARP/NDP for VIPs on one interface; nil when not configured.
	L2 *L2
	// BGP advertises VIPs to routers; nil when not configured.
	BGP *BGP
	// WithdrawOnShutdown: on SIGTERM withdraw every VIP and remove the
	// dataplane (default true); false leaves both so traffic keeps flowing
	// across a restart.
	WithdrawOnShutdown bool
}

// L2 is ARP (IPv4) and NDP (IPv6) announcement.
type L2 struct {
	Interface string
	// Members configures several gateways sharing the segment (one owner per
	// VIP); nil means this gateway is alone and owns every VIP.
	Members *Members
	// SourceAddresses (at most one per family) float with the VIPs: the
	// gateway owning the VIPs answers ARP/NDP for them on SourceInterface,
	// method nat translates to them instead of the gateway's own address,
	// and backends of nat-nosnat route replies through them. Every L2 VIP
	// is then owned together with them: one gateway carries them all.
	SourceAddresses []netip.Addr
	// SourceInterface is the backend segment ("" = Interface).
	SourceInterface string
}

// Members is the memberlist cluster of gateways on one L2 segment.
type Members struct {
	// Name is this gateway's member name; "" means the host name.
	Name string
	// Bind is where memberlist listens (TCP and UDP).
	Bind netip.AddrPort
	// Advertise is the address other members reach us at; invalid means
	// memberlist's choice (the bind address, or the first address of the
	// interface when bound to the unspecified address).
	Advertise netip.AddrPort
	// Join lists other members to contact at start.
	Join          []netip.AddrPort
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	SuspicionMult int
	// Key encrypts gossip (16, 24 or 32 bytes); empty means plaintext.
	Key        Secret
	SecretFile string
}

// BGP is the embedded BGP speaker.
type BGP struct {
	LocalASN uint32
	// RouterID is an IPv4 address; invalid means "pick the first IPv4
	// address of the gateway" at start.
	RouterID netip.Addr
	// ListenPort accepts incoming sessions when non-zero; 0 means edgelb
	// only connects out (no listening socket, no CAP_NET_BIND_SERVICE).
	ListenPort uint16
	Peers      []BGPPeer
}

// BGPPeer is one BGP neighbour.
type BGPPeer struct {
	// Name is for display; defaults to the address.
	Name    string
	Address netip.Addr
	ASN     uint32
	Port    uint16
	// SourceAddress is the local address of the session; invalid = kernel's choice.
	SourceAddress netip.Addr
	// MultihopTTL > 0 enables eBGP multihop with that TTL.
	MultihopTTL uint8
	// Password is the TCP MD5 (RFC 2385) key; empty = none.
	Password     Secret
	PasswordFile string
	HoldTime     time.Duration
	Keepalive    time.Duration
	// Passive waits for the peer to connect (needs BGP.ListenPort).
	Passive         bool
	GracefulRestart bool
	// BFD guards the session with BFD (nil: off).
	BFD *BFD
}

// BFD is a BGP peer's BFD session (RFC 5880; RFC 5883 multihop when the
// peer is multihop).
type BFD struct {
	ReceiveInterval  time.Duration
	TransmitInterval time.Duration
	Multiplier       int
	// Passive waits for the router's first BFD packet.
	Passive bool
}

// DataplaneMode chooses the kernel dataplane.
type DataplaneMode string

const (
	// ModeAuto picks IPVS when the kernel has it, else nftables, and logs which.
	ModeAuto     DataplaneMode = "auto"
	ModeNFTables DataplaneMode = "nftables"
	ModeIPVS     DataplaneMode = "ipvs"
)

// PortRange is an inclusive port range (the node-port range).
type PortRange = hostcheck.PortRange

// DefaultNodePortRange is Kubernetes' default.
var DefaultNodePortRange = PortRange{First: 30000, Last: 32767}

// Dataplane is how services are programmed into the kernel.
type Dataplane struct {
	Mode DataplaneMode
	// DrainTimeout bounds how long a removed backend keeps its connections.
	DrainTimeout time.Duration
	// ResyncInterval is how often the kernel is read back and drift repaired.
	ResyncInterval time.Duration
	// SNAT is the default for services without a method: true → nat,
	// false → nat-nosnat. Services that set a method keep it.
	SNAT bool
	// NodeAddresses are where node ports listen; empty = the gateway's addresses.
	NodeAddresses []netip.Addr
	NodePortRange PortRange
	// AllowEphemeralOverlap starts the daemon even when the node-port range
	// overlaps unreserved ephemeral ports (hostcheck's Error).
	AllowEphemeralOverlap bool
	// ConntrackPeak is the expected peak of concurrent connections through
	// the gateway; `edgelb check` sizes nf_conntrack_max and its hash table
	// for it (0: checks against the entries in the table at the time).
	ConntrackPeak uint64
	// IPVSDevice is the dummy device the IPVS dataplane binds VIPs to.
	IPVSDevice string
	// SetSysctls lets the dataplane set the sysctls it needs at start and
	// every resync (hostcheck's list for it); false leaves them to sysctl.d.
	SetSysctls bool
}

// API is the REST API and web page.
type API struct {
	Listen netip.AddrPort
	// TokenFile and Token: the single write token of configs before named
	// tokens (api.tokenFile); the API knows it as a write token named
	// "default". With no write token at all, writes are refused.
	TokenFile string
	Token     Secret
	// Tokens are the named credentials (api.tokens): role read reads, role
	// write reads and writes. The name is what the audit trail records.
	Tokens []APIToken
	// AnonymousReads serves reads without a token when Listen is beyond
	// loopback (on loopback reads never need one).
	AnonymousReads bool
	// TLS is nil for plain HTTP.
	TLS *TLS
	// LiveFlows: when the live view follows conntrack events.
	LiveFlows LiveFlows
}

// APIToken is one named API credential.
type APIToken struct {
	Name   string
	File   string
	Secret Secret
	Role   TokenRole
}

// TokenRole is what a token may do.
type TokenRole string

const (
	RoleRead  TokenRole = "read"
	RoleWrite TokenRole = "write"
)

// LiveFlows says when the web UI follows conntrack events. Any listener
// makes the kernel build an event for every connection through the host,
// which costs first packets ~10 µs on the lab's gateway (lab/faults).
type LiveFlows string

const (
	// LiveFlowsOnDemand follows events while a live view is open (and 30 s
	// after); between viewers flows are dumped periodically and on REST reads.
	LiveFlowsOnDemand LiveFlows = "onDemand"
	// LiveFlowsAlways follows events always: exact connection totals.
	LiveFlowsAlways LiveFlows = "always"
)

// TLS is the API's server certificate and optional client CA (mTLS).
type TLS struct {
	CertFile, KeyFile string
	Certificate       tls.Certificate
	// ClientCAFile/ClientCAs: when set, clients must present a certificate
	// signed by one of these.
	ClientCAFile string
	ClientCAs    *x509.CertPool
}

// BackendMode is where Kubernetes-mode traffic goes.
type BackendMode string

const (
	// BackendEndpoints sends traffic to pod IPs from EndpointSlices.
	BackendEndpoints BackendMode = "endpoints"
	// BackendNodePort sends traffic to node addresses and the Service's nodePort.
	BackendNodePort BackendMode = "nodeport"
)

// Kubernetes is cluster mode.
type Kubernetes struct {
	Enabled bool
	// Kubeconfig path; "" means in-cluster config.
	Kubeconfig        string
	LoadBalancerClass string
	// HandleClassless also serves LoadBalancer Services without a class.
	HandleClassless bool
	LeaseName       string
	LeaseNamespace  string
	BackendMode     BackendMode
	// NodeName is this gateway's Node (for externalTrafficPolicy: Local);
	// "" means the host name.
	NodeName string
	// Scheduler and Method apply to every Kubernetes Service. Method is nat
	// or nat-nosnat (Services map port → targetPort, which dr and tunnel
	// cannot); its default follows dataplane.snat.
	Scheduler proxy.Scheduler
	Method    proxy.Method
	// NodePortsOnLoadBalancers also serves a LoadBalancer Service's node
	// ports on the gateway's addresses (type NodePort Services always are).
	NodePortsOnLoadBalancers bool
	// NodeHealthCheck, with BackendMode nodeport, is a TCP check the gateway
	// runs against every node:nodePort backend (EndpointSlices say nothing
	// about a dead node); failing ones get weight 0. nil: no checks.
	NodeHealthCheck *lb.HealthCheck
}

// State is where standalone mode persists pools, services and assignments.
type State struct {
	// Dir holds the bbolt file (type bbolt).
	Dir string
	// Type: StateBolt (default) or StateEtcd (a fleet sharing Etcd).
	Type StateType
	Etcd *Etcd // type etcd only
}

// AllDownPolicy is what a service does when every backend fails its checks.
type AllDownPolicy string

const (
	// AllDownKeep keeps every backend in rotation (a guess beats a blackhole).
	AllDownKeep AllDownPolicy = "keep"
	// AllDownWithdraw stops announcing the VIP so routers and peers fail over.
	AllDownWithdraw AllDownPolicy = "withdraw"
)

// Health is global health-check behaviour (per-service checks are in
// ServiceSpec.Health).
type Health struct {
	AllDown     AllDownPolicy
	MaxInFlight int
}

// Log is the daemon's slog configuration.
type Log struct {
	Level slog.Level
	// Format is "text" or "json".
	Format string
}

// Defaults of values the file may leave out.
const (
	DefaultStateDir          = "/var/lib/edgelb"
	DefaultAPIListen         = "127.0.0.1:8080"
	DefaultDrainTimeout      = 60 * time.Second
	DefaultResyncInterval    = 30 * time.Second
	DefaultIPVSDevice        = "edgelb0"
	DefaultLoadBalancerClass = "edgelb.io/lb"
	DefaultLeaseName         = "edgelb"
	DefaultLeaseNamespace    = "edgelb-system"
	DefaultMembersPort       = 7946
	DefaultProbeInterval     = 80 * time.Millisecond // announce/l2's lab-measured tuning
	DefaultProbeTimeout      = 40 * time.Millisecond
	DefaultSuspicionMult     = 2
	DefaultBGPPort           = 179
	DefaultHoldTime          = 90 * time.Second
	DefaultBFDInterval       = 300 * time.Millisecond
	DefaultBFDMultiplier     = 3
	DefaultAffinityTimeout   = lb.DefaultAffinityTimeout
	MaxAffinityTimeout       = 24 * time.Hour
	DefaultCheckInterval     = lb.DefaultCheckInterval
	DefaultCheckTimeout      = lb.DefaultCheckTimeout
	DefaultRise              = lb.DefaultRise
	DefaultFall              = lb.DefaultFall
	DefaultHealthInFlight    = 64
	DefaultWeight            = 1
	MaxWeight                = lb.MaxWeight
)

// NodePortInput is what hostcheck.CheckNodePorts needs to know about this
// config: the node-port range, every node port and every explicit VIP:port.
func (c *Config) NodePortInput() hostcheck.NodePortInput {
	in := hostcheck.NodePortInput{Range: c.Dataplane.NodePortRange, NodeAddrs: c.Dataplane.NodeAddresses}
	np, vp := 0, 0 // sized once (10,000 services: growing them was a tenth of the checks)
	for _, s := range c.Services {
		for _, p := range s.Ports {
			if p.NodePort != 0 {
				np++
			}
			vp += len(s.VIPs)
		}
	}
	if np > 0 {
		in.NodePorts = make([]hostcheck.NodePort, 0, np)
	}
	if vp > 0 {
		in.VIPPorts = make([]hostcheck.VIPPort, 0, vp)
	}
	for _, s := range c.Services {
		for _, p := range s.Ports {
			if p.NodePort != 0 {
				in.NodePorts = append(in.NodePorts, hostcheck.NodePort{Port: p.NodePort, Protocol: p.Protocol, Service: s.Name})
			}
			for _, v := range s.VIPs {
				in.VIPPorts = append(in.VIPPorts, hostcheck.VIPPort{VIP: v, Port: p.Port, Protocol: p.Protocol, Service: s.Name})
			}
		}
	}
	return in
}

// NeedsIPVS names the services whose method only IPVS can do (dr, tunnel).
// With dataplane mode auto the daemon must refuse to start when auto picks
// nftables and this is not empty (never a silent downgrade).
func (c *Config) NeedsIPVS() []string {
	var out []string
	for _, s := range c.Services {
		if s.Method == proxy.DirectRouting || s.Method == proxy.Tunnel {
			out = append(out, s.Name)
		}
	}
	return out
}

// PoolByName returns the pool of that name, or nil.
func (c *Config) PoolByName(name string) *lb.Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}
