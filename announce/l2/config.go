package l2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Config configures the L2 announcer.
type Config struct {
	// Interface is the L2 segment's interface: ARP and NDP are answered
	// there, its carrier is watched.
	Interface string
	// Members configures the cluster of gateways sharing the segment; nil
	// means this gateway is alone and owns every VIP it can serve.
	Members *Members
	// Responders answer ARP (IPv4) and NDP (IPv6) for the owned VIPs.
	// Nil means the real ones on Interface (announce/arp, announce/ndp);
	// tests pass fakes.
	ARP, NDP Responder
	// Uplink reports the interface's carrier; nil means NetlinkUplink on
	// Interface.
	Uplink Uplink
	// GARPCount/GARPInterval tune the gratuitous ARP and unsolicited NA
	// bursts of the real responders (defaults 3 × 250 ms).
	GARPCount    int
	GARPInterval time.Duration
	Logger       *slog.Logger
	// SourceAddresses (at most one per family) float with the VIPs: each is
	// answered for like a VIP, on SourceInterface, and every VIP is owned
	// together with them (the rendezvous key of every VIP and source
	// address is the lowest source address), so that the gateway
	// translating to them is the one the backends' replies reach, and one
	// gateway is the state sync's primary.
	SourceAddresses []netip.Addr
	// SourceInterface is the backend segment ("" = Interface). SourceARP and
	// SourceNDP answer there when it differs (nil = the real responders).
	SourceInterface      string
	SourceARP, SourceNDP Responder
	// Handover is told of ownership changes: Gaining before the responders
	// answer for new VIPs, Released after they stopped (proxy/statesync).
	Handover Handover
}

// Handover is what must happen around a change of ownership besides the
// answering (connection-state sync). Its errors are logged; the ownership
// change goes on regardless (a VIP served without its synced connections
// beats a VIP not served).
type Handover interface {
	Gaining(ctx context.Context, vips []netip.Addr) error
	Released(ctx context.Context, vips []netip.Addr, owned int) error
}

// Members is the memberlist configuration.
type Members struct {
	// Name is this gateway's unique member name (the rendezvous hash input:
	// keep it stable across restarts or VIPs move). Required.
	Name string
	// Bind is where memberlist listens, UDP and TCP (default port 7946).
	// An unspecified address binds all and advertises the first address of
	// the same family on Interface.
	Bind netip.AddrPort
	// Advertise overrides the address other members reach us at.
	Advertise netip.AddrPort
	// Join lists other members to contact (at start, then every few seconds
	// for those not in the cluster, which heals partitions and restarts).
	Join []netip.AddrPort
	// Key encrypts and authenticates the gossip (AES, 16, 24 or 32 bytes);
	// empty means plaintext.
	Key []byte
	// Tuning of failure detection; zero fields take DefaultTuning's.
	Tuning Tuning
	// SettleTime is how long a (re)joining gateway waits, as a member,
	// before it may own VIPs: time to learn the cluster and every member's
	// claims, so it never claims a VIP another gateway still answers for
	// (default 1 s).
	SettleTime time.Duration
	// ClaimDelay is how long this gateway's eligibility for a VIP (ready and
	// serving it) must have been published before it claims the VIP, so
	// that two gateways becoming eligible at once never both claim it; it
	// must exceed two member-to-member message delays (default 200 ms).
	// It never delays a failover: survivors have been eligible all along.
	ClaimDelay time.Duration
	// StateWait: a live member whose state has not arrived blocks every new
	// claim (it might be answering for anything) and is asked for it again
	// every 300 ms; after StateWait a warning says so (default 2 s). Claims
	// are never made on the assumption that a silent member holds nothing.
	StateWait time.Duration
}

// Tuning is memberlist's failure detection. The defaults are the values
// measured in the lab (three gateways on a bridge, kill -9 of one, 20 kills):
// a dead gateway is seen in p50 ≈ 290 ms, max ≈ 420 ms, with no false
// positive in 60 s idle or with both cores busy; a live gateway frozen for
// 200 ms survives, 250 ms does not. Detection ≈ (0–3 probe intervals to the
// next probe) + 1 interval + SuspicionMult × interval; stall tolerance ≈
// (1 + SuspicionMult) × ProbeInterval. memberlist's stock LAN values detect
// in ≈ 6 s.
type Tuning struct {
	ProbeInterval    time.Duration // default 80 ms
	ProbeTimeout     time.Duration // default 40 ms
	SuspicionMult    int           // default 2
	GossipInterval   time.Duration // default 40 ms
	IndirectChecks   int           // default 1
	TCPTimeout       time.Duration // default 200 ms
	PushPullInterval time.Duration // default 5 s
}

// DefaultTuning returns the lab-measured sub-second tuning.
func DefaultTuning() Tuning {
	return Tuning{
		ProbeInterval:    80 * time.Millisecond,
		ProbeTimeout:     40 * time.Millisecond,
		SuspicionMult:    2,
		GossipInterval:   40 * time.Millisecond,
		IndirectChecks:   1,
		TCPTimeout:       200 * time.Millisecond,
		PushPullInterval: 5 * time.Second,
	}
}

// Defaults for Members.
const (
	DefaultPort       = 7946
	DefaultSettleTime = time.Second
	DefaultStateWait  = 2 * time.Second
	DefaultClaimDelay = 200 * time.Millisecond
)

func (t Tuning) withDefaults() Tuning {
	d := DefaultTuning()
	if t.ProbeInterval > 0 {
		d.ProbeInterval = t.ProbeInterval
	}
	if t.ProbeTimeout > 0 {
		d.ProbeTimeout = t.ProbeTimeout
	}
	if t.SuspicionMult > 0 {
		d.SuspicionMult = t.SuspicionMult
	}
	if t.GossipInterval > 0 {
		d.GossipInterval = t.GossipInterval
	}
	if t.IndirectChecks > 0 {
		d.IndirectChecks = t.IndirectChecks
	}
	if t.TCPTimeout > 0 {
		d.TCPTimeout = t.TCPTimeout
	}
	if t.PushPullInterval > 0 {
		d.PushPullInterval = t.PushPullInterval
	}
	return d
}

// validate checks the configuration; errors name the field and quote the value.
func (c *Config) validate() error {
	var errs []error
	if c.Interface == "" {
		errs = append(errs, errors.New(`l2: field "interface" is empty`))
	}
	fams := map[bool]bool{}
	for i, a := range c.SourceAddresses {
		switch {
		case !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a.Zone() != "":
			errs = append(errs, fmt.Errorf(`l2: field "sourceAddresses[%d]" %q is not a unicast address`, i, a))
		case fams[a.Unmap().Is4()]:
			errs = append(errs, fmt.Errorf(`l2: field "sourceAddresses[%d]" %q: one source address per family`, i, a))
		}
		fams[a.Unmap().Is4()] = true
	}
	if m := c.Members; m != nil {
		if m.Name == "" {
			errs = append(errs, errors.New(`l2: field "members.name" is empty`))
		} else if len(m.Name) > maxNameLen {
			errs = append(errs, fmt.Errorf(`l2: field "members.name" %q is longer than %d bytes`, m.Name, maxNameLen))
		}
		switch len(m.Key) {
		case 0, 16, 24, 32:
		default:
			errs = append(errs, fmt.Errorf(`l2: field "members.key" has %d bytes, want 16, 24 or 32`, len(m.Key)))
		}
		t := m.Tuning.withDefaults()
		if t.ProbeTimeout >= t.ProbeInterval {
			errs = append(errs, fmt.Errorf(`l2: field "members.tuning.probeTimeout" %q must be shorter than probeInterval %q`, t.ProbeTimeout, t.ProbeInterval))
		}
		for i, j := range m.Join {
			if !j.IsValid() || j.Port() == 0 {
				errs = append(errs, fmt.Errorf(`l2: field "members.join[%d]" %q is not address:port`, i, j))
			}
		}
	}
	return errors.Join(errs...)
}
