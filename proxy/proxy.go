// Package proxy defines the dataplane contract: one desired-state type for a
// load-balanced service, shared by every implementation (nftables, IPVS, the
// fake), so the same conformance suite runs unchanged against each of them.
//
// The shape follows a declarative Set(cfg): callers hand over the whole
// desired state, the implementation diffs it against the model of what it
// last programmed and changes only what differs. Calling Apply twice with the
// same Config is a no-op.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Protocol is an L4 protocol a virtual service listens on.
type Protocol uint8

const (
	TCP Protocol = 6
	UDP Protocol = 17
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// ParseProtocol accepts TCP/UDP in upper, lower or title case (tcp, Tcp,
// TCP); empty means TCP.
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "", "TCP", "tcp", "Tcp":
		return TCP, nil
	case "UDP", "udp", "Udp":
		return UDP, nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want TCP or UDP)", s)
}

// Scheduler names a backend-selection algorithm. The names are IPVS's; the
// nftables dataplane implements the subset it can express statelessly and
// refuses the rest with ErrUnsupported.
type Scheduler string

const (
	RoundRobin         Scheduler = "rr"
	WeightedRoundRobin Scheduler = "wrr"
	LeastConn          Scheduler = "lc"
	WeightedLeastConn  Scheduler = "wlc"
	SourceHash         Scheduler = "sh"
	DestinationHash    Scheduler = "dh"
	ShortestExpected   Scheduler = "sed"
	NeverQueue         Scheduler = "nq"
	MaglevHash         Scheduler = "mh"
	DefaultScheduler             = WeightedRoundRobin
)

// Schedulers lists every scheduler name edgelb accepts.
var Schedulers = []Scheduler{RoundRobin, WeightedRoundRobin, LeastConn, WeightedLeastConn,
	SourceHash, DestinationHash, ShortestExpected, NeverQueue, MaglevHash}

// ParseScheduler validates a scheduler name; empty means DefaultScheduler.
func ParseScheduler(s string) (Scheduler, error) {
	if s == "" {
		return DefaultScheduler, nil
	}
	for _, k := range Schedulers {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown scheduler %q (want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh)", s)
}

// Method is how packets reach a backend.
type Method string

const (
	// NAT rewrites the destination to the backend and the source to the
	// gateway, so replies return through the gateway whatever the backend's routes.
	NAT Method = "nat"
	// NATNoSNAT rewrites only the destination: the backend sees the client's
	// address and must route replies back through the gateway.
	NATNoSNAT Method = "nat-nosnat"
	// DirectRouting (IPVS only) rewrites the MAC: backend holds the VIP on lo.
	DirectRouting Method = "dr"
	// Tunnel (IPVS only) encapsulates in IPIP: backend decapsulates and holds the VIP.
	Tunnel Method = "tunnel"
)

// ParseMethod validates a forwarding method; empty means NAT.
func ParseMethod(s string) (Method, error) {
	switch Method(s) {
	case "":
		return NAT, nil
	case NAT, NATNoSNAT, DirectRouting, Tunnel:
		return Method(s), nil
	}
	return "", fmt.Errorf("unknown forwarding method %q (want nat, nat-nosnat, dr or tunnel)", s)
}

// Backend is one real server of a virtual service.
type Backend struct {
	Addr netip.AddrPort
	// Weight is the relative share of new connections. 0 takes no new
	// connections but keeps existing ones (that is how draining looks).
	Weight uint32
	// Draining marks a backend that is leaving: weight 0 in the kernel, and
	// removed once it has no connections left or the drain timeout passed.
	Draining bool
}

// Service is one virtual service: a frontend (VIP:port/proto and/or a node
// port on every gateway address) and its backends.
type Service struct {
	// Name is the user-facing owner, e.g. "web/http"; it is for display and
	// transcripts only: the identity is Key().
	Name string
	// VIP is the virtual address; invalid for a NodePort-only service.
	VIP      netip.Addr
	Port     uint16
	Protocol Protocol
	// NodePort, when non-zero, exposes the service on every Config.NodeAddrs
	// of the service's family (AddrFamily): NAT does not cross families, so
	// a dual-stack node port is two services, one per family.
	NodePort uint16
	// Family is the address family of a service without a VIP (its node
	// port's). Zero: its first backend's, else IPv4. With a VIP it is
	// ignored: the VIP's family is the service's.
	Family    Family
	Scheduler Scheduler
	// FWMark, when non-zero, makes this a firewall-mark service (IPVS
	// only; nftables refuses it with ErrUnsupported): every packet of
	// Family carrying this mark — set by the operator's own firewall rules,
	// never by edgelb — whatever its address, protocol and port. VIP,
	// Port, Protocol and NodePort are zero; a backend's port 0 keeps the
	// packet's destination port.
	FWMark uint32
	// Affinity is ClientIP session affinity: the same client keeps its
	// backend while it is seen within this timeout. 0 disables it.
	Affinity time.Duration
	Method   Method
	Backends []Backend
}

// Family is an address family. A frontend has exactly one: a VIP's, or a
// node port's (the node port of a dual-stack service is one service per
// family, each with that family's backends).
type Family uint8

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// FamilyOf is a's family (an IPv4-mapped IPv6 address is IPv6).
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// AddrFamily is the family of s's frontends and backends: its VIP's, else
// Family, else its first backend's, else IPv4.
func (s *Service) AddrFamily() Family {
	switch {
	case s.VIP.IsValid():
		return FamilyOf(s.VIP)
	case s.Family != 0:
		return s.Family
	case len(s.Backends) > 0:
		return FamilyOf(s.Backends[0].Addr.Addr())
	}
	return IPv4
}

// Key identifies a virtual service in the kernel.
type Key struct {
	VIP      netip.Addr // zero for NodePort-only services
	Port     uint16
	NodePort uint16
	Protocol Protocol
	// Family tells apart the two node-port services of a dual-stack
	// service (same node port, no VIP); with a VIP it is the VIP's.
	Family Family
	// FWMark: a firewall-mark service's mark (with Family: one per family).
	FWMark uint32
}

func (s Service) Key() Key {
	return Key{VIP: s.VIP, Port: s.Port, NodePort: s.NodePort, Protocol: s.Protocol, Family: s.AddrFamily(), FWMark: s.FWMark}
}

// String is "vip:port/TCP", "vip:port+nodeport:N/TCP", "nodeport:N/TCP"
// (IPv4), "nodeport6:N/TCP" (IPv6) or "fwmark:N/IPv4".
func (k Key) String() string {
	if k.FWMark != 0 {
		return fmt.Sprintf("fwmark:%d/%s", k.FWMark, k.Family)
	}
	var s string
	if k.VIP.IsValid() {
		s = netip.AddrPortFrom(k.VIP, k.Port).String()
	}
	if k.NodePort != 0 {
		np := "nodeport"
		if s != "" {
			s += "+"
		} else if k.Family == IPv6 {
			np = "nodeport6"
		}
		s += fmt.Sprintf("%s:%d", np, k.NodePort)
	}
	return s + "/" + k.Protocol.String()
}

// Config is the complete desired state of a dataplane.
type Config struct {
	Services []Service
	// NodeAddrs are the gateway's own addresses on which node ports listen.
	NodeAddrs []netip.Addr
}

// Dataplane converges the kernel to a Config. Implementations own their
// kernel objects exclusively (an nft table, IPVS services tagged as edgelb's)
// and never touch anything else.
type Dataplane interface {
	// Name is "nftables", "ipvs" or "fake".
	Name() string
	// Apply converges to cfg. It is idempotent; on error the kernel may be
	// partially converged and a later Apply or Resync finishes the job.
	Apply(ctx context.Context, cfg Config) error
	// Resync reads the kernel back and repairs drift from the last applied
	// Config (objects deleted or changed by someone else).
	Resync(ctx context.Context) error
	// Cleanup removes everything this dataplane owns in the kernel.
	Cleanup(ctx context.Context) error
	Close() error
}

// Errors every implementation returns (wrapped with context).
var (
	// ErrUnsupported: the dataplane cannot express the request (e.g. DR on nftables).
	ErrUnsupported = errors.New("not supported by this dataplane")
	// ErrKernelFeature: the running kernel lacks what the dataplane needs.
	ErrKernelFeature = errors.New("kernel feature missing")
)

// Flow is one live connection through edgelb, from conntrack or the IPVS
// connection table.
type Flow struct {
	ID       uint64
	Protocol Protocol
	Client   netip.AddrPort
	Frontend netip.AddrPort // VIP:port or nodeaddr:nodeport the client addressed
	Backend  netip.AddrPort
	State    string // TCP state (ESTABLISHED, TIME_WAIT...) or "" for UDP
	Start    time.Time
	// Counters are from the client's point of view: Orig is client→backend.
	OrigBytes, OrigPackets   uint64
	ReplyBytes, ReplyPackets uint64
}

// FlowEventType says what happened to a flow.
type FlowEventType uint8

const (
	FlowNew FlowEventType = iota + 1
	FlowUpdate
	FlowDestroy
)

// FlowEvent is a change to the set of live flows.
type FlowEvent struct {
	Type FlowEventType
	Flow Flow
}

// FlowSource reports live flows. Snapshot is authoritative; Watch delivers
// changes as they happen but may lose some under load, so consumers resync
// from Snapshot periodically.
type FlowSource interface {
	Snapshot(ctx context.Context) ([]Flow, error)
	// Watch calls fn for each event until ctx ends or an error occurs. It
	// starts by reporting every flow already there (FlowNew), so a consumer
	// that starts watching late (the web UI watches only while viewed)
	// misses nothing that is still alive.
	Watch(ctx context.Context, fn func(FlowEvent)) error
}

// CTMark is the conntrack mark the nftables dataplane sets (under CTMarkMask)
// on every connection it load-balances, so the flow reader dumps and watches
// only edgelb's connections and never the host's other traffic. Other bits of
// the mark are left to whoever else uses them.
const (
	CTMark     uint32 = 0x0ed6e1b0
	CTMarkMask uint32 = 0xffffffff
)

// ServiceErrors is what Apply returns when it refused some services and
// programmed every other one: a refusal is per service, never per Config, so
// one bad service (a scheduler the dataplane cannot express, a frontend
// claimed twice) does not take the gateway's other VIPs down with it. A
// refused service that was programmed before keeps its last good state; a new
// one is not in the kernel. Callers announce every VIP except Failed's.
type ServiceErrors struct {
	Failed map[Key]error
}

func (e *ServiceErrors) Error() string {
	keys := make([]Key, 0, len(e.Failed))
	for k := range e.Failed {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d service(s) refused, the others programmed:", len(keys))
	for _, k := range keys {
		b.WriteString(" ")
		b.WriteString(e.Failed[k].Error())
		b.WriteString(";")
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Unwrap lets errors.Is see each service's cause (e.g. ErrUnsupported).
func (e *ServiceErrors) Unwrap() []error {
	errs := make([]error, 0, len(e.Failed))
	for _, err := range e.Failed {
		errs = append(errs, err)
	}
	return errs
}

// FailedServices returns the services err refused one by one, or nil when
// err is nil or did not come from a per-service refusal (then the whole
// Apply failed and nothing can be assumed programmed).
func FailedServices(err error) map[Key]error {
	var se *ServiceErrors
	if errors.As(err, &se) {
		return se.Failed
	}
	return nil
}

// Partial reports whether err is only per-service refusals (the
// *ServiceErrors itself, not joined with another failure): every service not
// in FailedServices(err) was programmed.
func Partial(err error) bool {
	se, ok := err.(*ServiceErrors)
	return ok && len(se.Failed) > 0
}
