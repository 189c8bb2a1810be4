package webui

import (
	"context"
	"sort"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
)

// The pools/services/announce state the hub keeps current while someone
// watches, polled from the Manager and the announcers.

// wantState reports whether the pools/services/announce state is worth
// keeping current: while a stream client is connected and for watchIdle
// after the last one left (as the flow watch; negative: always). Between
// viewers nobody reads it — the REST API asks the Manager itself — and
// with 10,000 services it is megabytes of JSON and a listing every poll.
func (h *hub) wantState() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.watchIdle < 0 || len(h.clients) > 0 ||
		(!h.lastViewer.IsZero() && h.cfg.now().Sub(h.lastViewer) < h.cfg.watchIdle)
}

// dropState forgets the state and the frame history once no viewer is
// left (a client that comes back later starts with a fresh snapshot).
func (h *hub) dropState() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stateLive || len(h.clients) > 0 {
		return
	}
	h.state, h.stateLive, h.haveVersion = emptyState(), false, false
	clear(h.history)
	h.history, h.histBytes = nil, 0
	h.series = newSeriesStore()
}

// ensureState reads the state now if it is not being kept current: a
// stream that starts between viewers must not get an empty snapshot.
func (h *hub) ensureState(ctx context.Context, m lb.Manager, reporters []announce.Reporter) {
	h.mu.Lock()
	live := h.stateLive
	h.mu.Unlock()
	if !live {
		h.refreshState(ctx, m, reporters)
	}
}

// versioned is a Manager that says when its state may have changed
// (lb/engine): polling it costs nothing while nothing changes.
type versioned interface{ Version() uint64 }

// refreshState polls the Manager and the announcers and publishes changes.
func (h *hub) refreshState(ctx context.Context, m lb.Manager, reporters []announce.Reporter) {
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	var ver uint64
	vm, isVersioned := m.(versioned)
	if isVersioned {
		ver = vm.Version()
		h.mu.Lock()
		if h.haveVersion && h.managerVersion == ver {
			m = nil // unchanged: only the announcers are polled
		}
		h.mu.Unlock()
	}
	ok := true
	if m != nil {
		h.mu.Lock()
		h.lists++
		h.mu.Unlock()
		if ps, err := m.Pools(ctx); err != nil {
			h.cfg.log.Warn("webui: list pools", "err", err)
			ok = false
		} else if data, err := marshal(poolStatuses(ps)); err == nil {
			h.publish("pools", data)
		}
		if ss, err := m.Services(ctx); err != nil {
			h.cfg.log.Warn("webui: list services", "err", err)
			ok = false
		} else if data, err := marshal(serviceStatuses(ss)); err == nil {
			h.publish("services", data)
		}
		if isVersioned && ok {
			// The version read before the lists: a change racing with
			// them bumps it again, and the next poll reads once more.
			h.mu.Lock()
			h.managerVersion, h.haveVersion = ver, true
			h.mu.Unlock()
		}
	}
	if data, err := marshal(announceStatuses(reporters)); err == nil {
		h.publish("announce", data)
	}
	// Live only once read whole: a failed read is tried again next poll,
	// and a stream starting meanwhile reads it itself (ensureState).
	h.mu.Lock()
	h.stateLive = h.stateLive || ok
	h.mu.Unlock()
}

func poolStatuses(ps []lb.PoolStatus) []PoolStatus {
	out := make([]PoolStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, poolStatusOf(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

func serviceStatuses(ss []lb.ServiceStatus) []ServiceStatus {
	out := make([]ServiceStatus, 0, len(ss))
	for _, s := range ss {
		out = append(out, serviceStatusOf(s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out
}

func announceStatuses(rs []announce.Reporter) []announce.Status {
	out := make([]announce.Status, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Status())
	}
	return out
}
