// Package bfdd runs BFD (RFC 5880) sessions through FRR's bfdd, supervised
// by edgelb the way proxy/statesync supervises conntrackd: edgelb starts
// bfdd with an empty configuration in its own directory, sets the sessions
// over bfdd's vty socket and reads their state from it. RFC 5881 single-hop
// and RFC 5883 multihop sessions, passive mode and the timers are bfdd's.
//
// bfdd runs without zebra (it needs none for sessions keyed by address), so
// the gateway needs only the frr package's bfdd binary, not a routing suite.
package bfdd

import (
	"fmt"
	"net/netip"
	"time"
)

// Session is one BFD session edgelb wants, keyed by Peer.
type Session struct {
	Peer netip.Addr
	// Local is our address for the session; required for a multihop
	// session (RFC 5883 sessions are keyed by both ends), optional otherwise.
	Local    netip.Addr
	Multihop bool
	// MinTTL accepts multihop packets that crossed at most 256-MinTTL hops
	// (bfdd's minimum-ttl; 0 = bfdd's default 254).
	MinTTL     uint8
	RxInterval time.Duration
	TxInterval time.Duration
	Multiplier uint8
	// Passive waits for the peer's first packet before sending (RFC 5880 §6.1).
	Passive bool
}

// key is bfdd's session key as written in its "peer" command.
func (s Session) key() string {
	k := "peer " + s.Peer.String()
	if s.Multihop {
		k += " multihop"
	}
	if s.Local.IsValid() {
		k += " local-address " + s.Local.String()
	}
	return k
}

// commands are the vty commands, inside the "bfd" node, that create the
// session or bring an existing one to these settings (each is idempotent).
func (s Session) commands() []string {
	cmds := []string{
		s.key(),
		fmt.Sprintf("detect-multiplier %d", s.Multiplier),
		fmt.Sprintf("receive-interval %d", s.RxInterval.Milliseconds()),
		fmt.Sprintf("transmit-interval %d", s.TxInterval.Milliseconds()),
	}
	if s.Passive {
		cmds = append(cmds, "passive-mode")
	} else {
		cmds = append(cmds, "no passive-mode")
	}
	if s.Multihop && s.MinTTL > 0 {
		cmds = append(cmds, fmt.Sprintf("minimum-ttl %d", s.MinTTL))
	}
	return append(cmds, "exit")
}

// Validate checks what bfdd would refuse: intervals of 10ms-60s in whole
// milliseconds, a multiplier of 2-255, and a local address for multihop.
func (s Session) Validate() error {
	for _, iv := range []time.Duration{s.RxInterval, s.TxInterval} {
		if iv < 10*time.Millisecond || iv > 60*time.Second || iv%time.Millisecond != 0 {
			return fmt.Errorf("bfd session %s: interval %s: want whole milliseconds from 10ms to 60s", s.Peer, iv)
		}
	}
	if s.Multiplier < 2 {
		return fmt.Errorf("bfd session %s: multiplier %d: want 2-255", s.Peer, s.Multiplier)
	}
	if !s.Peer.IsValid() {
		return fmt.Errorf("bfd session: no peer address")
	}
	if s.Multihop && !s.Local.IsValid() {
		return fmt.Errorf("bfd session %s: a multihop session needs a local address", s.Peer)
	}
	return nil
}

// Session states as bfdd reports them.
const (
	StateUp      = "up"
	StateDown    = "down"
	StateInit    = "init"
	StateAdmin   = "shutdown"
	StateUnknown = "unknown" // bfdd not running (yet), or the session not created
	// StateUnavailable: bfdd cannot run on this gateway (Unavailable); the
	// diagnostic says why.
	StateUnavailable = "unavailable"
)

// State is one session's state and counters, read from bfdd in one pass.
type State struct {
	Peer     netip.Addr
	Multihop bool
	Status   string
	// For is how long the session has been in Status (bfdd counts whole seconds).
	For time.Duration
	// Diagnostic is why the session last went down (RFC 5880 §4.1), ours
	// and the peer's, as bfdd words it: "control detection time expired".
	Diagnostic       string
	RemoteDiagnostic string
	// Negotiated timers: the peer's, as it announced them.
	RemoteRxInterval time.Duration
	RemoteTxInterval time.Duration
	RemoteMultiplier int
	RxPackets        uint64
	TxPackets        uint64
	// Ups and Downs count the session's transitions to Up and to Down.
	Ups   uint64
	Downs uint64
}
