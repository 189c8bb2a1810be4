package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/bfdd"
	api "github.com/osrg/gobgp/v3/api"
)

// bfdStatus is a peer's BFD session as the speaker last read it; guarded
// by Speaker.mu.
type bfdStatus struct {
	bfdd.State
	session  bfdd.Session
	lastDown time.Time
}

func (b *bfdStatus) report() *announce.BFDState {
	out := &announce.BFDState{State: b.Status, Multihop: b.session.Multihop,
		Detect:     fmt.Sprintf("%s x %d", b.session.RxInterval, b.session.Multiplier),
		Diagnostic: b.Diagnostic, RemoteDiagnostic: b.RemoteDiagnostic, Ups: b.Ups, Downs: b.Downs,
		RxPackets: b.RxPackets, TxPackets: b.TxPackets}
	if out.Diagnostic == "ok" {
		out.Diagnostic = ""
	}
	if out.RemoteDiagnostic == "ok" {
		out.RemoteDiagnostic = ""
	}
	if !b.lastDown.IsZero() {
		out.LastDown = b.lastDown.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// startBFD sets the BFD sessions of the peers that want one and starts the
// watcher. Called from New, before the BGP sessions start, so that BFD is
// usually Up by the time BGP is.
func (s *Speaker) startBFD() error {
	var sessions []bfdd.Session
	for _, p := range s.cfg.Peers {
		if p.BFD == nil {
			continue
		}
		sess := p.bfdSession()
		sessions = append(sessions, sess)
		ps := s.peers[p.Address.Unmap()]
		ps.bfd = &bfdStatus{State: bfdd.State{Peer: sess.Peer, Status: bfdd.StateUnknown}, session: sess}
		s.m.bfdUp.WithLabelValues(p.name()).Set(0)
		s.m.bfdTransitions.WithLabelValues(p.name(), "up")
		s.m.bfdTransitions.WithLabelValues(p.name(), "down")
	}
	if len(sessions) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.cfg.BFD.Set(ctx, sessions); err != nil {
		return fmt.Errorf("bgp: bfd sessions: %w", err)
	}
	poll := s.cfg.BFDPoll
	if poll <= 0 {
		poll = DefaultBFDPoll
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopBFD = func() { stop(); <-done }
	go func() {
		defer close(done)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(wctx, 2*time.Second)
			states, err := s.cfg.BFD.States(rctx)
			cancel()
			s.onBFDStates(wctx, states, err)
		}
	}()
	return nil
}

// onBFDStates applies one reading of every BFD session: a session that
// leaves Up resets its BGP session at once (hard reset: the router's side
// of BFD drops its routes; ours reconnects after connectRetry).
func (s *Speaker) onBFDStates(ctx context.Context, states []bfdd.State, err error) {
	byPeer := map[netip.Addr]bfdd.State{}
	for _, st := range states {
		byPeer[st.Peer] = st
	}
	now := time.Now()
	var reset []netip.Addr
	s.mu.Lock()
	for _, a := range s.order {
		p := s.peers[a]
		if p.bfd == nil {
			continue
		}
		st, ok := byPeer[a]
		if err != nil || !ok {
			// bfdd not answering: keep the counters, say we do not know.
			st = p.bfd.State
			st.Status = bfdd.StateUnknown
			if errors.Is(err, bfdd.ErrPrivileges) { // it never will here: say why
				st.Status, st.Diagnostic = bfdd.StateUnavailable, err.Error()
			}
		}
		old := p.bfd.Status
		p.bfd.State = st
		if old == st.Status {
			continue
		}
		switch {
		case st.Status == bfdd.StateUp:
			s.m.bfdUp.WithLabelValues(p.Name).Set(1)
			s.m.bfdTransitions.WithLabelValues(p.Name, "up").Inc()
			s.log.Info("bfd session up", "peer", p.Name, "address", a)
		case old == bfdd.StateUp:
			s.m.bfdUp.WithLabelValues(p.Name).Set(0)
			p.bfd.lastDown = now
			if st.Status != bfdd.StateUnknown {
				s.m.bfdTransitions.WithLabelValues(p.Name, "down").Inc()
				reset = append(reset, a)
			}
			s.log.Warn("bfd session down", "peer", p.Name, "address", a, "state", st.Status,
				"diagnostic", st.Diagnostic, "remoteDiagnostic", st.RemoteDiagnostic)
		}
	}
	s.mu.Unlock()
	for _, a := range reset {
		// First, so the "bgp session down" log line names the cause.
		s.noteError(a, "BFD session went down")
		err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: a.String(), Communication: "BFD down"})
		if err != nil {
			s.log.Warn("bfd down: reset bgp session", "address", a, "err", err)
		}
	}
}
