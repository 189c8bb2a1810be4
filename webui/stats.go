package webui

import (
	"net/netip"
	"sort"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// Flow is one live connection as the API and the stream send it. "In" is
// client → backend, "out" is backend → client.
type Flow struct {
	ID         uint64    `json:"id"`
	Protocol   string    `json:"protocol"`
	Client     string    `json:"client"`
	Frontend   string    `json:"frontend"`
	Backend    string    `json:"backend"`
	State      string    `json:"state,omitempty"`
	Start      time.Time `json:"start"`
	BytesIn    uint64    `json:"bytesIn"`
	BytesOut   uint64    `json:"bytesOut"`
	PacketsIn  uint64    `json:"packetsIn"`
	PacketsOut uint64    `json:"packetsOut"`
}

func flowOf(f proxy.Flow) Flow {
	return Flow{ID: f.ID, Protocol: f.Protocol.String(), Client: f.Client.String(), Frontend: f.Frontend.String(),
		Backend: f.Backend.String(), State: f.State, Start: f.Start.UTC(),
		BytesIn: f.OrigBytes, BytesOut: f.ReplyBytes, PacketsIn: f.OrigPackets, PacketsOut: f.ReplyPackets}
}

// Counters aggregate flows: current = live now, total = seen since edgelb
// started, bytes and packets = closed flows plus the live ones so far.
type Counters struct {
	Current    int64  `json:"current"`
	Total      uint64 `json:"total"`
	BytesIn    uint64 `json:"bytesIn"`
	BytesOut   uint64 `json:"bytesOut"`
	PacketsIn  uint64 `json:"packetsIn"`
	PacketsOut uint64 `json:"packetsOut"`
}

// BackendStats is one row of a VIP's table.
type BackendStats struct {
	Backend string `json:"backend"`
	Counters
}

// VIPStats is one frontend (VIP:port or node address:node port) and protocol.
type VIPStats struct {
	Frontend string `json:"frontend"`
	Protocol string `json:"protocol"`
	Counters
	Backends []BackendStats `json:"backends"`
}

type vipKey struct {
	Frontend netip.AddrPort
	Protocol proxy.Protocol
}

type vipAgg struct {
	Counters
	backends map[netip.AddrPort]*Counters
}

// aggregates keeps per-VIP and per-backend counters up to date from flow
// events, in O(1) per event, so the stream never re-scans the flow table.
type aggregates struct {
	vips map[vipKey]*vipAgg
}

func newAggregates() *aggregates { return &aggregates{vips: map[vipKey]*vipAgg{}} }

func keyOf(f proxy.Flow) vipKey { return vipKey{Frontend: f.Frontend, Protocol: f.Protocol} }

func (a *aggregates) counters(f proxy.Flow) (*Counters, *Counters) {
	k := keyOf(f)
	v := a.vips[k]
	if v == nil {
		v = &vipAgg{backends: map[netip.AddrPort]*Counters{}}
		a.vips[k] = v
	}
	b := v.backends[f.Backend]
	if b == nil {
		b = &Counters{}
		v.backends[f.Backend] = b
	}
	return &v.Counters, b
}

// add counts a new flow.
func (a *aggregates) add(f proxy.Flow) {
	for _, c := range pair(a.counters(f)) {
		c.Current++
		c.Total++
		c.BytesIn += f.OrigBytes
		c.BytesOut += f.ReplyBytes
		c.PacketsIn += f.OrigPackets
		c.PacketsOut += f.ReplyPackets
	}
}

// update moves the byte counters by what the flow did since old. Counters of
// a flow only grow; unsigned wrap-around makes new-old right either way.
func (a *aggregates) update(old, f proxy.Flow) {
	if keyOf(old) != keyOf(f) || old.Backend != f.Backend {
		// Not expected from conntrack; keep the books straight anyway.
		a.remove(old)
		a.add(f)
		for _, c := range pair(a.counters(f)) {
			c.Total--
		}
		return
	}
	for _, c := range pair(a.counters(f)) {
		c.BytesIn += f.OrigBytes - old.OrigBytes
		c.BytesOut += f.ReplyBytes - old.ReplyBytes
		c.PacketsIn += f.OrigPackets - old.OrigPackets
		c.PacketsOut += f.ReplyPackets - old.ReplyPackets
	}
}

// remove ends a flow; its bytes stay in the totals.
func (a *aggregates) remove(f proxy.Flow) {
	for _, c := range pair(a.counters(f)) {
		c.Current--
	}
}

func pair(a, b *Counters) [2]*Counters { return [2]*Counters{a, b} }

func (a *aggregates) stats(k vipKey) VIPStats {
	v := a.vips[k]
	s := VIPStats{Frontend: k.Frontend.String(), Protocol: k.Protocol.String(), Counters: v.Counters,
		Backends: make([]BackendStats, 0, len(v.backends))}
	for be, c := range v.backends {
		s.Backends = append(s.Backends, BackendStats{Backend: be.String(), Counters: *c})
	}
	sort.Slice(s.Backends, func(i, j int) bool { return s.Backends[i].Backend < s.Backends[j].Backend })
	return s
}

func (a *aggregates) all() []VIPStats {
	keys := make([]vipKey, 0, len(a.vips))
	for k := range a.vips {
		keys = append(keys, k)
	}
	sortKeys(keys)
	out := make([]VIPStats, 0, len(keys))
	for _, k := range keys {
		out = append(out, a.stats(k))
	}
	return out
}

func sortKeys(keys []vipKey) {
	sort.Slice(keys, func(i, j int) bool {
		if c := keys[i].Frontend.Compare(keys[j].Frontend); c != 0 {
			return c < 0
		}
		return keys[i].Protocol < keys[j].Protocol
	})
}
