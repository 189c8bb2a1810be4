package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	api "github.com/osrg/gobgp/v3/api"
)

// A pool's announce.peers sends its routes to those peers only. This is
// GoBGP's own policy machinery: one global export policy with a statement
// per peer, "prefix in edgelb-not-to-N and neighbour in edgelb-peer-N →
// reject" (GoBGP evaluates the global export policy for each peer a path is
// sent to, with that peer as the neighbour; per-neighbour policies exist
// only for route-server clients). edgelb-not-to-N holds exactly the
// advertised prefixes that must not reach peer N. The sets change with the
// routes, before a path is added and after it is withdrawn, so no UPDATE
// ever reaches a peer its pool excludes. GoBGP applies export policy when
// it sends a path, not when a set changes: a route whose peers change is
// withdrawn, its sets changed, and announced again.

const selectionPolicy = "edgelb-peer-selection"

func notToSet(i int) string    { return fmt.Sprintf("edgelb-not-to-%d", i) }
func peerSetName(i int) string { return fmt.Sprintf("edgelb-peer-%d", i) }

// setupPeerSelection installs the sets (empty) and the policy. Called once
// by New, before any peer or path exists.
func (s *Speaker) setupPeerSelection(ctx context.Context) error {
	if len(s.cfg.Peers) == 0 {
		return nil
	}
	pol := &api.Policy{Name: selectionPolicy}
	for i, p := range s.cfg.Peers {
		a := p.Address.Unmap()
		sets := []*api.DefinedSet{
			{DefinedType: api.DefinedType_NEIGHBOR, Name: peerSetName(i), List: []string{netip.PrefixFrom(a, a.BitLen()).String()}},
			{DefinedType: api.DefinedType_PREFIX, Name: notToSet(i)},
		}
		for _, d := range sets {
			if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: d}); err != nil {
				return fmt.Errorf("bgp: peer selection set %s: %w", d.Name, err)
			}
		}
		pol.Statements = append(pol.Statements, &api.Statement{
			Name: notToSet(i),
			Conditions: &api.Conditions{
				PrefixSet:   &api.MatchSet{Type: api.MatchSet_ANY, Name: notToSet(i)},
				NeighborSet: &api.MatchSet{Type: api.MatchSet_ANY, Name: peerSetName(i)},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_REJECT},
		})
	}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: pol}); err != nil {
		return fmt.Errorf("bgp: peer selection policy: %w", err)
	}
	err := s.srv.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_EXPORT, Policies: []*api.Policy{{Name: selectionPolicy}},
		DefaultAction: api.RouteAction_ACCEPT,
	}})
	if err != nil {
		return fmt.Errorf("bgp: peer selection policy: %w", err)
	}
	return nil
}

// excluded lists (by config index) the peers of r's family that r must
// not reach: none when r names no peers.
func (s *Speaker) excluded(r *route) []int {
	if r.peers == nil {
		return nil
	}
	var out []int
	for i, p := range s.cfg.Peers {
		if p.Address.Unmap().Is4() == r.prefix.Addr().Is4() && !slices.Contains(r.peers, p.name()) {
			out = append(out, i)
		}
	}
	return out
}

// exclusions collects set changes per peer, applied in one call each.
type exclusions map[int][]netip.Prefix

func (x exclusions) add(p netip.Prefix, peers []int) {
	for _, i := range peers {
		x[i] = append(x[i], p)
	}
}

// apply adds the prefixes to (or removes them from) each peer's set.
func (s *Speaker) applyExclusions(ctx context.Context, x exclusions, add bool) error {
	var errs []string
	for i, ps := range x {
		d := &api.DefinedSet{DefinedType: api.DefinedType_PREFIX, Name: notToSet(i)}
		for _, p := range ps {
			d.Prefixes = append(d.Prefixes, &api.Prefix{IpPrefix: p.String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: uint32(p.Bits())})
		}
		var err error
		if add {
			err = s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: d})
		} else {
			err = s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: d})
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("peer %s: %v", s.cfg.Peers[i].name(), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bgp: peer selection sets: %s", strings.Join(errs, "; "))
	}
	return nil
}
