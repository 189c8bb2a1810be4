package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/edgelb/edgelb/announce"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

// Session states as Status reports them (BGP FSM names, RFC 4271 §8.2.2).
const (
	StateIdle        = "Idle"
	StateConnect     = "Connect"
	StateActive      = "Active"
	StateOpenSent    = "OpenSent"
	StateOpenConfirm = "OpenConfirm"
	StateEstablished = "Established"
)

// PeerStatus is one session as the speaker sees it.
type PeerStatus struct {
	Name    string
	Address netip.Addr
	Port    uint16
	ASN     uint32
	State   string
	// Since is when the session entered State (zero before the first event).
	Since time.Time
	// LocalAddress is our end of the last session (the routes' next hop).
	LocalAddress string
	// LastError is why the session is not (or was last not) Established:
	// a connect error, a NOTIFICATION, hold timer expiry.
	LastError   string
	LastErrorAt time.Time
	// Established counts the times the session came up.
	Established int
	// BFD is the peer's BFD session (nil: BFD off for this peer).
	BFD *announce.BFDState
}

// peerState is PeerStatus plus bookkeeping; guarded by Speaker.mu.
type peerState struct {
	PeerStatus
	cfg     Peer
	started bool     // added to GoBGP
	logged  string   // last error written to the log (each distinct error once)
	recent  []string // errors since the session was last Established, for the "down" log line
	bfd     *bfdStatus
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_CONNECT:
		return StateConnect
	case api.PeerState_ACTIVE:
		return StateActive
	case api.PeerState_OPENSENT:
		return StateOpenSent
	case api.PeerState_OPENCONFIRM:
		return StateOpenConfirm
	case api.PeerState_ESTABLISHED:
		return StateEstablished
	}
	return StateIdle
}

func parsePeerKey(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// onPeerEvent runs on the one goroutine GoBGP's WatchEvent gives us: it
// only updates the state under mu, the metrics and the log.
func (s *Speaker) onPeerEvent(r *api.WatchEventResponse) {
	pe := r.GetPeer()
	if pe == nil || pe.Type != api.WatchEventResponse_PeerEvent_STATE || pe.Peer.GetState() == nil {
		return
	}
	addr, ok := parsePeerKey(pe.Peer.State.NeighborAddress)
	if !ok {
		return
	}
	state := sessionState(pe.Peer.State.SessionState)
	now := time.Now()
	s.mu.Lock()
	p := s.peers[addr]
	if p == nil || p.State == state {
		s.mu.Unlock()
		return
	}
	old := p.State
	p.State, p.Since = state, now
	reason := strings.Join(p.recent, "; ")
	if state == StateEstablished {
		p.Established++
		p.logged, p.recent = "", nil
		if la := pe.Peer.GetTransport().GetLocalAddress(); la != "" && la != "<nil>" {
			p.LocalAddress = la
		}
	}
	name, local := p.Name, p.LocalAddress
	s.mu.Unlock()

	switch {
	case state == StateEstablished:
		s.m.up.WithLabelValues(name).Set(1)
		s.m.established.WithLabelValues(name).Inc()
		s.log.Info("bgp session established", "peer", name, "address", addr, "local", local)
	case old == StateEstablished:
		s.m.up.WithLabelValues(name).Set(0)
		s.log.Warn("bgp session down", "peer", name, "address", addr, "state", state, "reason", reason)
	default:
		s.log.Debug("bgp session state", "peer", name, "address", addr, "from", old, "to", state)
	}
}

// noteError records why a session is not up. While the session is down
// each distinct error is logged once until it comes up again, so a peer
// that refuses us every few seconds does not flood the log; errors that end
// an Established session go into its one "session down" line instead.
func (s *Speaker) noteError(addr netip.Addr, text string) {
	s.noteErrorf(addr, func(Peer) string { return text })
}

func (s *Speaker) noteErrorf(addr netip.Addr, describe func(Peer) string) {
	s.mu.Lock()
	p := s.peers[addr]
	if p == nil {
		s.mu.Unlock()
		return
	}
	text := describe(p.cfg)
	p.LastError, p.LastErrorAt = text, time.Now()
	if !slices.Contains(p.recent, text) && len(p.recent) < 4 {
		p.recent = append(p.recent, text)
	}
	first := p.logged != text && p.State != StateEstablished
	if first {
		p.logged = text
	}
	name := p.Name
	s.mu.Unlock()
	if first {
		s.log.Warn("bgp peer", "peer", name, "address", addr, "err", text)
	}
}

// connectError explains a failed connection attempt. A wrong TCP MD5
// password cannot be told apart on the wire: the peer's kernel drops our
// signed SYNs without a word, so the connect times out. Say so.
func connectError(p Peer, err error) string {
	msg := fmt.Sprintf("connect to %s: %v", netip.AddrPortFrom(p.Address, p.port()), err)
	var ne net.Error
	switch {
	case p.Password != "" && errors.As(err, &ne) && ne.Timeout():
		msg += " (TCP MD5 password set: a wrong password on either side makes the peer drop our SYNs silently, which looks exactly like this)"
	case errors.Is(err, syscall.ECONNREFUSED):
		msg += " (nothing listens on the peer's BGP port, or it does not accept us as a neighbour)"
	}
	return msg
}

// gobgpLogger routes GoBGP's log into slog and picks out, per peer, the
// reasons a session fails. It claims Debug level because GoBGP reports
// failed connection attempts only at Debug; everything below Warn that is
// not about a session is dropped (or passed on at Debug).
type gobgpLogger struct{ s *Speaker }

func (l gobgpLogger) peerOf(f gobgplog.Fields) (netip.Addr, bool) {
	k, _ := f["Key"].(string)
	return parsePeerKey(k)
}

func (l gobgpLogger) Panic(msg string, f gobgplog.Fields) {
	l.s.log.Error("gobgp: "+msg, fieldsAttr(f))
	panic("gobgp: " + msg)
}

func (l gobgpLogger) Fatal(msg string, f gobgplog.Fields) {
	l.s.log.Error("gobgp: "+msg, fieldsAttr(f))
	panic("gobgp: " + msg)
}

func (l gobgpLogger) Error(msg string, f gobgplog.Fields) {
	l.s.log.Error("gobgp: "+msg, fieldsAttr(f))
}

func (l gobgpLogger) Warn(msg string, f gobgplog.Fields) {
	addr, isPeer := l.peerOf(f)
	switch msg {
	case "received notification", "sent notification":
		code, _ := f["Code"].(uint8)
		sub, _ := f["Subcode"].(uint8)
		text := fmt.Sprintf("%s: %s", msg, bgp.NewNotificationErrorCode(code, sub))
		if r, ok := f["Communicated-Reason"].(string); ok && r != "" {
			text += fmt.Sprintf(" (%q)", r)
		}
		if isPeer {
			l.s.noteError(addr, text)
			return
		}
	case "hold timer expired":
		if isPeer {
			l.s.noteError(addr, "hold timer expired: no KEEPALIVE or UPDATE from the peer within the hold time")
			return
		}
	}
	l.s.log.Warn("gobgp: "+msg, fieldsAttr(f))
}

func (l gobgpLogger) Info(msg string, f gobgplog.Fields) {
	if msg == "Peer Down" {
		if addr, ok := l.peerOf(f); ok {
			if r, _ := f["Reason"].(string); r != "" && !strings.HasPrefix(r, "notification") {
				// Notifications were recorded in full when they passed.
				l.s.noteError(addr, "session down: "+strings.ReplaceAll(r, "-", " "))
			}
		}
	}
	l.s.log.Debug("gobgp: "+msg, fieldsAttr(f))
}

func (l gobgpLogger) Debug(msg string, f gobgplog.Fields) {
	if msg == "failed to connect" {
		if addr, ok := l.peerOf(f); ok {
			err, _ := f["Error"].(error)
			if err == nil {
				err = fmt.Errorf("%v", f["Error"])
			}
			l.s.noteErrorf(addr, func(p Peer) string { return connectError(p, err) })
		}
		return
	}
	// GoBGP's debug output includes every UPDATE; pass it on only when
	// someone asked for debug logs.
	if l.s.log.Enabled(context.Background(), slog.LevelDebug) {
		l.s.log.Debug("gobgp: "+msg, fieldsAttr(f))
	}
}

func (l gobgpLogger) SetLevel(gobgplog.LogLevel) {}

func (l gobgpLogger) GetLevel() gobgplog.LogLevel { return gobgplog.DebugLevel }

func fieldsAttr(f gobgplog.Fields) slog.Attr {
	attrs := make([]any, 0, len(f))
	for k, v := range f {
		if k == gobgplog.FieldFacility {
			continue
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	return slog.Group("gobgp", attrs...)
}
