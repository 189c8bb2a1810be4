package statesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Mesh is the sync of two or more gateways: one conntrackd per peer, each
// an FTFW channel over unicast UDP between two gateways, all fed by the same
// conntrack events. Not one multicast channel: conntrackd tracks a single
// message sequence per channel, so with three senders on a group a receiver
// takes another sender's numbers as the expected ones and drops the next
// primary message as "delayed" (FTFW accepts no delayed packet), and an
// acknowledgement from one backup lets the primary forget a message another
// never got. In lab/faults (gw3/*/on, two busy cores) a backup held 98 of
// 100 streams for good; per pair, every message is acknowledged or resent by
// the one receiver that needs it.
type Mesh struct {
	links []*Conntrackd
}

var _ Syncer = (*Mesh)(nil)

// PairPorts gives each peer's channel its UDP port: the gateways' addresses
// (self and peers) in order, the pair of the i-th and j-th (i < j) uses
// base + its rank among all pairs in that order. Both ends of a pair compute
// the same port from the same set of addresses, so no port is configured
// per pair; two gateways use base itself.
func PairPorts(self netip.Addr, peers []netip.Addr, base uint16) ([]uint16, error) {
	if !self.IsValid() {
		return nil, fmt.Errorf("%w: this gateway's address is required", ErrOptions)
	}
	all := append([]netip.Addr{self}, peers...)
	slices.SortFunc(all, netip.Addr.Compare)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return nil, fmt.Errorf("%w: address %s listed twice among this gateway and its peers", ErrOptions, all[i])
		}
	}
	n := len(all)
	if LastPairPort(base, n) > 65535 {
		return nil, fmt.Errorf("%w: port %d leaves no room for the %d pairs of %d gateways", ErrOptions, base, n*(n-1)/2, n)
	}
	pos := func(a netip.Addr) int { i, _ := slices.BinarySearchFunc(all, a, netip.Addr.Compare); return i }
	me := pos(self)
	out := make([]uint16, len(peers))
	for k, p := range peers {
		i, j := min(me, pos(p)), max(me, pos(p))
		// Pairs before (i, j): all (a, b) with a < i, then (i, i+1..j-1).
		rank := i*n - i*(i+1)/2 + (j - i - 1)
		out[k] = base + uint16(rank)
	}
	return out, nil
}

// LastPairPort is the highest port the pairs of n gateways use from base
// (may exceed 65535: the caller refuses such a base).
func LastPairPort(base uint16, n int) int { return int(base) + n*(n-1)/2 - 1 }

// LinkDir is where the channel on port keeps its configuration, control
// socket and lock file, under the mesh's dir (short: a UNIX socket path is
// at most 107 bytes).
func LinkDir(dir string, port uint16) string { return filepath.Join(dir, strconv.Itoa(int(port))) }

// StartMesh starts one supervised conntrackd per peer (Start's options, Peer
// and Port set per link, Dir = LinkDir(o.Dir, port)).
func StartMesh(o Options, peers []netip.Addr, log *slog.Logger) (*Mesh, error) {
	if len(peers) == 0 {
		return nil, fmt.Errorf("%w: a peer is required", ErrOptions)
	}
	ports, err := PairPorts(o.Address, peers, o.Port)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Mesh{}
	for i, p := range peers {
		lo := o
		lo.Peer, lo.Port, lo.Dir = p, ports[i], LinkDir(o.Dir, ports[i])
		c, err := Start(lo, log.With("peer", p.String()))
		if err != nil {
			m.Close()
			return nil, err
		}
		m.links = append(m.links, c)
	}
	return m, nil
}

// each runs f on every link at once (a takeover's steps on three links take
// as long as on one) and joins their errors.
func (m *Mesh) each(f func(*Conntrackd) error) error {
	errs := make([]error, len(m.links))
	var wg sync.WaitGroup
	for i, c := range m.links {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Gaining implements Syncer: every link commits what its peer sent, and
// then sends this gateway's connections (now including those) to its peer.
func (m *Mesh) Gaining(ctx context.Context, vips []netip.Addr) error {
	return m.each(func(c *Conntrackd) error { return c.Gaining(ctx, vips) })
}

// Released implements Syncer.
func (m *Mesh) Released(ctx context.Context, vips []netip.Addr, owned int) error {
	return m.each(func(c *Conntrackd) error { return c.Released(ctx, vips, owned) })
}

// Status implements Syncer: the links' counters summed (the internal cache
// is the same table on every link: its largest count), the longest peer
// silence, and each link's own status in Links.
func (m *Mesh) Status() Status {
	st := Status{Kind: "conntrackd", Running: true, Role: "backup"}
	var chans []string
	for _, c := range m.links {
		l := c.Status()
		st.Links = append(st.Links, l)
		chans = append(chans, l.Channel)
		st.Peers = append(st.Peers, l.Peers...)
		st.Running = st.Running && l.Running
		st.Restarts += l.Restarts
		if l.Role == "primary" {
			st.Role = "primary"
		}
		st.Stats.Internal = max(st.Stats.Internal, l.Stats.Internal)
		st.Stats.External += l.Stats.External
		st.Stats.SentPackets += l.Stats.SentPackets
		st.Stats.RecvPackets += l.Stats.RecvPackets
		st.Stats.SendErrors += l.Stats.SendErrors
		st.Stats.RecvErrors += l.Stats.RecvErrors
		st.Stats.Lost += l.Stats.Lost
		st.Stats.Unacked += l.Stats.Unacked
		st.Stats.Unsent += l.Stats.Unsent
		st.Stats.ResendDropped += l.Stats.ResendDropped
		st.Errors += l.Errors
		if l.LastError != "" {
			st.LastError = l.LastError
		}
		if l.LastTakeover.After(st.LastTakeover) {
			st.LastTakeover = l.LastTakeover
		}
		st.LastTakeoverTook = max(st.LastTakeoverTook, l.LastTakeoverTook)
		st.PeerSilence = max(st.PeerSilence, l.PeerSilence)
	}
	if len(m.links) == 1 {
		st.PID = st.Links[0].PID
	}
	st.Channel = strings.Join(chans, ", ")
	return st
}

// Close implements Syncer.
func (m *Mesh) Close() error {
	return m.each(func(c *Conntrackd) error { return c.Close() })
}
