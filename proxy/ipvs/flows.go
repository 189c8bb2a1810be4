package ipvs

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nsthread"
)

// Flows is a proxy.FlowSource over the IPVS connection table of one network
// namespace. IPVS keeps no per-connection byte counters (conntrack does, and
// proxy/conntrack reads them: the nftables table gives IPVS connections
// edgelb's ct mark); per-service and per-destination counters come from
// Dataplane.Stats.
type Flows struct {
	ns       netns.NsHandle
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	seen     map[uint64]time.Time // first time each flow was seen
}

var _ proxy.FlowSource = (*Flows)(nil)

// DefaultFlowInterval is how often Watch reads the table.
const DefaultFlowInterval = time.Second

// NewFlows reads the IPVS connection table of the namespace at path ("" =
// the caller's). Close releases the namespace handle.
func NewFlows(path string, interval time.Duration) (*Flows, error) {
	f := &Flows{ns: netns.None(), interval: interval, now: time.Now, seen: map[uint64]time.Time{}}
	if f.interval <= 0 {
		f.interval = DefaultFlowInterval
	}
	if path != "" {
		ns, err := netns.GetFromPath(path)
		if err != nil {
			return nil, fmt.Errorf("ipvs: flows: open network namespace %q: %w", path, err)
		}
		f.ns = ns
	}
	return f, nil
}

func (f *Flows) Close() error {
	if f.ns.IsOpen() {
		return f.ns.Close()
	}
	return nil
}

// Conns reads the raw connection table, templates included.
func (f *Flows) Conns() ([]Conn, error) {
	var b []byte
	err := nsthread.Do(fdOf(f.ns), func() error {
		// thread-self: /proc/net follows the process's first thread, not
		// the thread switched into the namespace.
		var err error
		b, err = os.ReadFile("/proc/thread-self/net/ip_vs_conn")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ipvs: read connection table: %w", err)
	}
	return ParseConnTable(bytes.NewReader(b))
}

// Snapshot lists live connections (persistence templates are not flows).
func (f *Flows) Snapshot(ctx context.Context) ([]proxy.Flow, error) {
	conns, err := f.Conns()
	if err != nil && len(conns) == 0 {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	live := map[uint64]bool{}
	out := make([]proxy.Flow, 0, len(conns))
	for _, c := range conns {
		if c.Template {
			continue
		}
		id := flowID(c)
		live[id] = true
		start, ok := f.seen[id]
		if !ok {
			start = now
			f.seen[id] = start
		}
		st := c.State
		if c.Protocol == proxy.UDP {
			st = ""
		}
		out = append(out, proxy.Flow{ID: id, Protocol: c.Protocol, Client: c.Client, Frontend: c.Virtual,
			Backend: c.Dest, State: st, Start: start})
	}
	for id := range f.seen {
		if !live[id] {
			delete(f.seen, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// Watch reads the table every interval and reports what changed. IPVS has
// no event stream for its connection table, so polling is the only way.
func (f *Flows) Watch(ctx context.Context, fn func(proxy.FlowEvent)) error {
	prev := map[uint64]proxy.Flow{}
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		flows, err := f.Snapshot(ctx)
		if err != nil && flows == nil {
			return err
		}
		cur := make(map[uint64]proxy.Flow, len(flows))
		for _, fl := range flows {
			cur[fl.ID] = fl
			old, ok := prev[fl.ID]
			switch {
			case !ok:
				fn(proxy.FlowEvent{Type: proxy.FlowNew, Flow: fl})
			case old.State != fl.State:
				fn(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: fl})
			}
		}
		for id, fl := range prev {
			if _, ok := cur[id]; !ok {
				fn(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: fl})
			}
		}
		prev = cur
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ServiceStats are the kernel's counters of one owned virtual service.
type ServiceStats struct {
	Frontend netip.AddrPort // a firewall-mark service's: its family's unspecified address, port 0
	Protocol proxy.Protocol
	FWMark   uint32 // non-zero: a firewall-mark service
	Counters Counters
	Dests    []DestStats
}

// DestStats are the counters of one real server.
type DestStats struct {
	Backend          netip.AddrPort
	Weight           int
	Active, Inactive int
	Counters         Counters
}

// Stats reads the per-service and per-destination counters of every
// service of the last applied Config. IPVS folds packets into them from a
// 2-second estimator, so they lag traffic by up to that long.
func (d *Dataplane) Stats(ctx context.Context) ([]ServiceStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.eng == nil {
		return nil, fmt.Errorf("ipvs: stats: dataplane is closed")
	}
	if d.eng.last == nil {
		return nil, nil
	}
	kernel, err := d.h.Services()
	if err != nil {
		return nil, err
	}
	var out []ServiceStats
	for _, s := range kernel {
		if _, ok := d.eng.last.Services[s.Key]; !ok {
			continue
		}
		ds, err := d.h.Dests(s.Key)
		if err != nil {
			return nil, err
		}
		st := ServiceStats{Frontend: netip.AddrPortFrom(s.Key.Addr, s.Key.Port), Protocol: s.Key.Proto, FWMark: s.Key.Mark, Counters: s.Stats}
		for _, rs := range ds {
			st.Dests = append(st.Dests, DestStats{Backend: rs.Addr, Weight: rs.Weight, Active: rs.Active, Inactive: rs.Inactive, Counters: rs.Stats})
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].Frontend.Compare(out[j].Frontend); c != 0 {
			return c < 0
		}
		return out[i].Protocol < out[j].Protocol
	})
	return out, nil
}

// Flows returns a FlowSource over this dataplane's namespace.
func (d *Dataplane) Flows() (*Flows, error) { return NewFlows(d.opts.NetNS, 0) }
