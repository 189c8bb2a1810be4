package bgp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/edgelb/edgelb/announce/bfdd"
	"github.com/edgelb/edgelb/lb/fielderr"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for fields left zero.
const (
	DefaultPort         = 179
	DefaultHoldTime     = 90 * time.Second
	DefaultConnectRetry = 5 * time.Second
	// DefaultRestartTime is the graceful-restart time we advertise: how long
	// a router keeps our routes (as stale) after our session drops without
	// a NOTIFICATION, waiting for us to come back.
	DefaultRestartTime = 120 * time.Second
)

// Config is the embedded BGP speaker. The caller (cmd/edgelb) maps the
// user's config file onto it; values here are already typed.
type Config struct {
	LocalASN uint32
	// RouterID is an IPv4 address (required).
	RouterID netip.Addr
	// ListenPort accepts incoming sessions when > 0. 0 and -1 mean edgelb
	// only connects out: no listening socket, no CAP_NET_BIND_SERVICE.
	ListenPort int32
	// ListenAddresses restrict the listener (default: every address).
	ListenAddresses []netip.Addr
	Peers           []Peer
	// RestartTime is advertised to peers with GracefulRestart (default 120 s,
	// at most 4095 s).
	RestartTime time.Duration
	Logger      *slog.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// BFD runs the BFD sessions of the peers with BFD set (required then;
	// the speaker closes it). The daemon passes a supervised FRR bfdd.
	BFD bfdd.Runner
	// BFDPoll is how often the BFD sessions' states are read (default
	// 50 ms): a Down seen here resets the BGP session.
	BFDPoll time.Duration
}

// BFD guards a peer's session with BFD (RFC 5880; RFC 5881 single-hop, or
// RFC 5883 multihop when the peer is multihop). BFD Down resets the BGP
// session at once instead of waiting for the hold time.
type BFD struct {
	// ReceiveInterval and TransmitInterval (default 300 ms each) and
	// Multiplier (default 3) give a detection time of 900 ms.
	ReceiveInterval  time.Duration
	TransmitInterval time.Duration
	Multiplier       uint8
	// Passive waits for the router's first BFD packet before sending.
	Passive bool
}

// BFD defaults (MetalLB's and FRR's profile defaults).
const (
	DefaultBFDInterval   = 300 * time.Millisecond
	DefaultBFDMultiplier = 3
	DefaultBFDPoll       = 50 * time.Millisecond
)

// Peer is one BGP neighbour. A session carries the unicast family of the
// peer's address: IPv4 VIPs go to IPv4 peers, IPv6 VIPs to IPv6 peers.
type Peer struct {
	// Name labels the peer in status and metrics (default: the address).
	Name    string
	Address netip.Addr
	ASN     uint32
	// Port is the peer's BGP port (default 179).
	Port uint16
	// SourceAddress is the local address of the session (default: the
	// kernel's choice). It is also the routes' next hop towards this peer.
	SourceAddress netip.Addr
	// MultihopTTL > 0 enables eBGP multihop with that TTL.
	MultihopTTL uint8
	// Password is the TCP MD5 signature key (RFC 2385); empty = none.
	Password string
	// HoldTime (default 90 s, at least 3 s) and Keepalive (default
	// HoldTime/3), whole seconds as BGP carries them.
	HoldTime  time.Duration
	Keepalive time.Duration
	// ConnectRetry is the pause between connection attempts (default 5 s).
	ConnectRetry time.Duration
	// Passive waits for the peer to connect (needs ListenPort).
	Passive bool
	// GracefulRestart advertises the capability (RFC 4724, with the
	// notification extension of RFC 8538), so the peer keeps our routes
	// while edgelb restarts after Close(false).
	GracefulRestart bool
	// BFD, when set, runs a BFD session with the peer.
	BFD *BFD
}

// bfdSession is the peer's BFD session as bfdd takes it.
func (p Peer) bfdSession() bfdd.Session {
	b := *p.BFD
	s := bfdd.Session{Peer: p.Address.Unmap(), RxInterval: b.ReceiveInterval, TxInterval: b.TransmitInterval,
		Multiplier: b.Multiplier, Passive: b.Passive, Multihop: p.MultihopTTL > 1}
	if s.RxInterval == 0 {
		s.RxInterval = DefaultBFDInterval
	}
	if s.TxInterval == 0 {
		s.TxInterval = DefaultBFDInterval
	}
	if s.Multiplier == 0 {
		s.Multiplier = DefaultBFDMultiplier
	}
	if p.SourceAddress.IsValid() {
		s.Local = p.SourceAddress.Unmap()
	}
	if s.Multihop {
		// Accept packets that crossed as many hops as the BGP session may
		// (RFC 5883 leaves the check to the configuration): TTL 255 sent,
		// at least 256-MultihopTTL left on arrival.
		s.MinTTL = uint8(max(1, min(254, 256-int(p.MultihopTTL))))
	}
	return s
}

func (p Peer) port() uint16 {
	if p.Port == 0 {
		return DefaultPort
	}
	return p.Port
}

func (p Peer) name() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Address.String()
}

func (p Peer) holdTime() time.Duration {
	if p.HoldTime == 0 {
		return DefaultHoldTime
	}
	return p.HoldTime
}

func (p Peer) keepalive() time.Duration {
	if p.Keepalive == 0 {
		return p.holdTime() / 3
	}
	return p.Keepalive
}

func (p Peer) connectRetry() time.Duration {
	if p.ConnectRetry == 0 {
		return DefaultConnectRetry
	}
	return p.ConnectRetry
}

func (c Config) restartTime() time.Duration {
	if c.RestartTime == 0 {
		return DefaultRestartTime
	}
	return c.RestartTime
}

func fieldErr(field, value, format string, args ...any) error {
	return &fielderr.Error{Field: field, Value: value, Err: fmt.Errorf(format, args...)}
}

// validate checks everything GoBGP would otherwise refuse late (or accept
// silently); errors name the field and quote the value.
func (c Config) validate() error {
	var errs []error
	if c.LocalASN == 0 || c.LocalASN == 23456 || c.LocalASN == 65535 || c.LocalASN == 0xFFFFFFFF {
		errs = append(errs, fieldErr("localASN", strconv.FormatUint(uint64(c.LocalASN), 10), "not a usable AS number"))
	}
	if !c.RouterID.Is4() || c.RouterID.IsUnspecified() {
		errs = append(errs, fieldErr("routerID", addrString(c.RouterID), "want a non-zero IPv4 address"))
	}
	if c.ListenPort > 65535 || c.ListenPort < -1 {
		errs = append(errs, fieldErr("listenPort", strconv.Itoa(int(c.ListenPort)), "want 1-65535, or 0/-1 for no listener"))
	}
	if rt := c.RestartTime; rt < 0 || rt > 4095*time.Second {
		errs = append(errs, fieldErr("restartTime", rt.String(), "want 1s-4095s"))
	}
	seen := map[netip.Addr]int{}
	names := map[string]int{}
	for i, p := range c.Peers {
		f := func(name string) string { return fmt.Sprintf("peers[%d].%s", i, name) }
		if !p.Address.IsValid() || p.Address.IsUnspecified() || p.Address.Zone() != "" {
			errs = append(errs, fieldErr(f("address"), addrString(p.Address), "want a unicast IP address"))
		} else if j, dup := seen[p.Address.Unmap()]; dup {
			errs = append(errs, fieldErr(f("address"), p.Address.String(), "same address as peers[%d]", j))
		} else {
			seen[p.Address.Unmap()] = i
		}
		if j, dup := names[p.name()]; dup {
			errs = append(errs, fieldErr(f("name"), p.name(), "same name as peers[%d]", j))
		} else {
			names[p.name()] = i
		}
		if p.ASN == 0 || p.ASN == 23456 || p.ASN == 65535 || p.ASN == 0xFFFFFFFF {
			errs = append(errs, fieldErr(f("asn"), strconv.FormatUint(uint64(p.ASN), 10), "not a usable AS number"))
		}
		if p.SourceAddress.IsValid() && p.Address.IsValid() && p.SourceAddress.Unmap().Is4() != p.Address.Unmap().Is4() {
			errs = append(errs, fieldErr(f("sourceAddress"), p.SourceAddress.String(), "not the family of address %s", p.Address))
		}
		if p.MultihopTTL > 0 && p.ASN == c.LocalASN {
			errs = append(errs, fieldErr(f("multihopTTL"), strconv.Itoa(int(p.MultihopTTL)), "eBGP multihop on an iBGP session"))
		}
		if len(p.Password) > 80 { // TCP_MD5SIG_MAXKEYLEN
			errs = append(errs, fieldErr(f("password"), "[redacted]", "longer than 80 bytes"))
		}
		ht := p.holdTime()
		if ht < 3*time.Second || ht > 65535*time.Second || ht%time.Second != 0 {
			errs = append(errs, fieldErr(f("holdTime"), p.HoldTime.String(), "want whole seconds, 3s-65535s"))
		}
		if ka := p.keepalive(); ka < time.Second || ka >= ht || ka%time.Second != 0 {
			errs = append(errs, fieldErr(f("keepalive"), p.Keepalive.String(), "want whole seconds, at least 1s and below the hold time"))
		}
		if cr := p.connectRetry(); cr < time.Second || cr%time.Second != 0 {
			errs = append(errs, fieldErr(f("connectRetry"), p.ConnectRetry.String(), "want whole seconds, at least 1s"))
		}
		if p.BFD != nil {
			if c.BFD == nil {
				errs = append(errs, fieldErr(f("bfd"), "enabled", "no BFD runner given"))
			} else if err := p.bfdSession().Validate(); err != nil {
				errs = append(errs, fieldErr(f("bfd"), "enabled", "%v", err))
			}
		}
		if p.Passive && c.ListenPort <= 0 {
			errs = append(errs, fieldErr(f("passive"), "true", "a passive peer needs listenPort"))
		}
	}
	return errors.Join(errs...)
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
