package webui

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/edgelb/edgelb/proxy"
)

// The hub is the live view's single source of truth. Producers (the flow
// watcher, the periodic flow resync, the pollers of the Manager and the
// announcers) change its state under one mutex; every change becomes a
// frame, an SSE event encoded once and shared by all clients. Flow changes
// are batched for BatchInterval so 1,000 new flows per second are four
// frames per second, not a thousand.
//
// Each client has a bounded queue of frames. Pushing never blocks: when a
// client's queue is full (it stopped reading) its queue is dropped and
// replaced by a flag, and the next time it can be written to it gets one
// fresh snapshot instead, so a stalled client costs a flag, not memory,
// and never slows the producer or the other clients.

// frame is one encoded SSE event.
type frame struct {
	id   uint64
	data []byte
}

// Snapshot is the "snapshot" event and GET-able state: everything the page shows.
type Snapshot struct {
	Time     time.Time      `json:"time"`
	Pools    jsontext.Value `json:"pools"`
	Services jsontext.Value `json:"services"`
	Announce jsontext.Value `json:"announce"`
	Stats    []VIPStats     `json:"stats"`
	// Flows are the newest MaxSnapshotFlows live flows; FlowsTotal counts all.
	Flows      []Flow `json:"flows"`
	FlowsTotal int    `json:"flowsTotal"`
}

// Delta is the "delta" event: flow changes since the previous one and the
// aggregates they changed.
type Delta struct {
	Time       time.Time  `json:"time"`
	New        []Flow     `json:"new"`
	Update     []Flow     `json:"update"`
	Destroy    []uint64   `json:"destroy"`
	Stats      []VIPStats `json:"stats"`
	FlowsTotal int        `json:"flowsTotal"`
}

type flowEntry struct {
	f   proxy.Flow
	gen uint64 // resync generation of the last event that touched it
}

// pendingFlow is a flow's net change since the last delta.
type pendingFlow struct {
	f     proxy.Flow
	isNew bool // clients have not been told about it yet
	gone  bool
}

type hubConfig struct {
	batch                      time.Duration
	queueFrames, queueBytes    int
	historyBytes, maxSnapFlows int
	// watchIdle: how long flow events are followed after the last stream
	// client left; negative: always.
	watchIdle time.Duration
	now       func() time.Time
	log       *slog.Logger
}

type hub struct {
	cfg  hubConfig
	boot string // event IDs are boot-seq, so IDs from an earlier run never match

	mu        sync.Mutex
	seq       uint64
	gen       uint64
	flows     map[uint64]*flowEntry
	destroyed map[uint64]uint64 // id → gen, so a stale resync does not revive it
	agg       *aggregates
	pending   map[uint64]*pendingFlow
	dirty     map[vipKey]struct{}
	// state holds the last JSON of "pools", "services", "announce": a
	// slice of the frame that carried it, so 10,000 services are kept
	// once, not once here and once in the history. It is kept only while
	// someone views the stream (stateLive; see wantState).
	state     map[string][]byte
	stateLive bool
	// lastViewer is when the last stream client left (zero: none yet).
	lastViewer time.Time
	// managerVersion is the lb.Manager version state was read at
	// (versioned managers only): polls skip re-reading while it holds.
	managerVersion uint64
	haveVersion    bool
	history        []*frame
	histBytes      int
	// series is the charts' 15-minute history, kept like state: only
	// while viewed (sampleSeries, dropState).
	series  *seriesStore
	clients map[*client]struct{}

	// Flow watching (runFlows): src once known, whether Watch runs, when
	// the last dump began; viewers wakes runFlows when clients come and go.
	src        proxy.FlowSource
	watching   bool
	lastResync time.Time
	viewers    chan struct{}

	// refreshMu makes refreshState one at a time (the poll loop and a
	// stream that starts with no state), so an older read never
	// overwrites a newer one.
	refreshMu sync.Mutex

	// counters for metrics and tests
	resyncs uint64
	lists   uint64 // Manager reads by refreshState
}

// emptyState is the state before the first read and after dropState.
func emptyState() map[string][]byte {
	return map[string][]byte{"pools": []byte("[]"), "services": []byte("[]"), "announce": []byte("[]")}
}

func newHub(cfg hubConfig) *hub {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &hub{cfg: cfg, boot: hex.EncodeToString(b[:]),
		flows: map[uint64]*flowEntry{}, destroyed: map[uint64]uint64{}, agg: newAggregates(),
		pending: map[uint64]*pendingFlow{}, dirty: map[vipKey]struct{}{},
		state: emptyState(), series: newSeriesStore(),
		clients: map[*client]struct{}{}, viewers: make(chan struct{}, 1)}
}

// ---- producers ----

// flowEvent applies one change from the FlowSource.
func (h *hub) flowEvent(ev proxy.FlowEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.applyLocked(ev, h.gen)
}

func (h *hub) applyLocked(ev proxy.FlowEvent, gen uint64) {
	f := ev.Flow
	e, known := h.flows[f.ID]
	switch {
	case ev.Type == proxy.FlowDestroy:
		if !known {
			return
		}
		h.agg.update(e.f, f)
		h.agg.remove(f)
		delete(h.flows, f.ID)
		h.destroyed[f.ID] = gen
		h.mark(f, false, true)
	case known:
		if e.f == f {
			e.gen = gen
			return
		}
		h.agg.update(e.f, f)
		e.f, e.gen = f, gen
		h.mark(f, false, false)
	default:
		h.agg.add(f)
		h.flows[f.ID] = &flowEntry{f: f, gen: gen}
		delete(h.destroyed, f.ID)
		h.mark(f, true, false)
	}
}

func (h *hub) mark(f proxy.Flow, isNew, gone bool) {
	h.dirty[keyOf(f)] = struct{}{}
	p := h.pending[f.ID]
	if p == nil {
		h.pending[f.ID] = &pendingFlow{f: f, isNew: isNew, gone: gone}
		return
	}
	p.f = f
	p.gone = gone
	// A flow destroyed and recreated under the same ID between two deltas
	// is an update for clients that saw the first one.
}

// beginResync opens a resync generation: events from now on are newer than
// the snapshot about to be taken.
func (h *hub) beginResync() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	// Destroyed IDs only matter to the dump in flight; pruning here (not on
	// success) keeps the map bounded even when dumps keep failing.
	for id, g := range h.destroyed {
		if g+1 < h.gen {
			delete(h.destroyed, id)
		}
	}
	return h.gen
}

// applySnapshot brings the flow table in line with an authoritative dump
// taken in generation gen, without undoing events that arrived meanwhile.
func (h *hub) applySnapshot(flows []proxy.Flow, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	live := make(map[uint64]struct{}, len(flows))
	for _, f := range flows {
		live[f.ID] = struct{}{}
		if g, ok := h.destroyed[f.ID]; ok && g >= gen {
			continue // destroyed by an event after the dump started
		}
		if e, ok := h.flows[f.ID]; ok && e.gen >= gen {
			continue // an event newer than the dump already updated it
		}
		h.applyLocked(proxy.FlowEvent{Type: proxy.FlowNew, Flow: f}, gen-1)
	}
	for id, e := range h.flows {
		if _, ok := live[id]; !ok && e.gen < gen {
			h.applyLocked(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: e.f}, gen-1)
		}
	}
}

// publish replaces one part of the state ("pools", "services", "announce")
// and sends it to clients when it changed.
func (h *hub) publish(kind string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.Equal(h.state[kind], data) {
		return
	}
	f := h.emitLocked(kind, data)
	h.state[kind] = f.data[len(f.data)-len(data)-2 : len(f.data)-2 : len(f.data)-2]
}

// flush turns pending flow changes into one delta frame.
func (h *hub) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
}

func (h *hub) flushLocked() {
	if len(h.pending) == 0 && len(h.dirty) == 0 {
		return
	}
	d := Delta{Time: h.cfg.now().UTC(), New: []Flow{}, Update: []Flow{}, Destroy: []uint64{}, FlowsTotal: len(h.flows)}
	for id, p := range h.pending {
		switch {
		case p.gone && p.isNew:
			// Born and gone within one batch: only the aggregates saw it.
		case p.gone:
			d.Destroy = append(d.Destroy, id)
		case p.isNew:
			d.New = append(d.New, flowOf(p.f))
		default:
			d.Update = append(d.Update, flowOf(p.f))
		}
	}
	sort.Slice(d.New, func(i, j int) bool { return d.New[i].ID < d.New[j].ID })
	keys := make([]vipKey, 0, len(h.dirty))
	for k := range h.dirty {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		d.Stats = append(d.Stats, h.agg.stats(k))
	}
	clear(h.pending)
	clear(h.dirty)
	data, err := marshal(d)
	if err != nil {
		h.cfg.log.Error("webui: encode delta", "err", err)
		return
	}
	h.emitLocked("delta", data)
}

// emitLocked numbers a frame, keeps it for resumption and queues it for
// every client. It never blocks.
func (h *hub) emitLocked(event string, data []byte) *frame {
	h.seq++
	f := &frame{id: h.seq, data: h.encode(h.seq, event, data)}
	h.history = append(h.history, f)
	h.histBytes += len(f.data)
	drop := 0
	for h.histBytes > h.cfg.historyBytes && drop < len(h.history)-1 {
		h.histBytes -= len(h.history[drop].data)
		drop++
	}
	if drop > 0 {
		// Copy down so the dropped frames are not pinned by the array.
		n := copy(h.history, h.history[drop:])
		clear(h.history[n:])
		h.history = h.history[:n]
	}
	for c := range h.clients {
		c.push(f)
	}
	return f
}

func (h *hub) encode(id uint64, event string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(event)+48)
	b = append(b, "id: "...)
	b = h.appendID(b, id)
	b = append(b, "\nevent: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...) // compact JSON: no newlines
	return append(b, "\n\n"...)
}

func (h *hub) appendID(b []byte, id uint64) []byte {
	b = append(b, h.boot...)
	b = append(b, '-')
	return strconv.AppendUint(b, id, 10)
}

// parseID reads a Last-Event-ID of this boot; ok is false for another boot's.
func (h *hub) parseID(s string) (uint64, bool) {
	boot, seq, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found || boot != h.boot {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	return n, err == nil
}

// ---- readers ----

// snapshot copies the state (encoding happens outside the lock). Pending
// flow changes are flushed first, so the snapshot is exactly the state
// after the last frame and no later delta repeats what it already holds.
func (h *hub) snapshot() (uint64, Snapshot, Series) {
	h.mu.Lock()
	h.flushLocked()
	// The series under the same lock: no "sample" can fall between them.
	ser := h.seriesLocked()
	s := Snapshot{Time: h.cfg.now().UTC(), Pools: h.state["pools"], Services: h.state["services"],
		Announce: h.state["announce"], Stats: h.agg.all(), FlowsTotal: len(h.flows)}
	raw := make([]proxy.Flow, 0, len(h.flows))
	for _, e := range h.flows {
		raw = append(raw, e.f)
	}
	id := h.seq
	h.mu.Unlock()
	s.Flows = newestFlows(raw, h.cfg.maxSnapFlows)
	return id, s, ser
}

// seriesLocked is the charts' whole window, as the "series" event that
// follows every snapshot.
func (h *hub) seriesLocked() Series {
	return Series{Step: SeriesStep.Seconds(), Times: h.series.timesOldestFirst(), VIPs: h.series.view(0)}
}

// sampleSeries closes one chart step: every aggregate is sampled into its
// ring and the newest step goes out as a "sample" event. Pending flow
// changes are flushed first so the sample matches the deltas sent before it.
func (h *hub) sampleSeries() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
	now := h.cfg.now().UTC()
	first := !h.series.started
	h.series.take(h.agg, now)
	if first {
		return // a baseline, not a step
	}
	data, err := marshal(SeriesFrame{Time: now, Step: SeriesStep.Seconds(), VIPs: h.series.view(1)})
	if err != nil {
		h.cfg.log.Error("webui: encode sample", "err", err)
		return
	}
	h.emitLocked("sample", data)
}

// newestFlows returns up to n flows, newest first (ties by ID for stable output).
func newestFlows(raw []proxy.Flow, n int) []Flow {
	sort.Slice(raw, func(i, j int) bool {
		if !raw[i].Start.Equal(raw[j].Start) {
			return raw[i].Start.After(raw[j].Start)
		}
		return raw[i].ID > raw[j].ID
	})
	if n >= 0 && len(raw) > n {
		raw = raw[:n]
	}
	out := make([]Flow, len(raw))
	for i, f := range raw {
		out[i] = flowOf(f)
	}
	return out
}

// snapshotFrame is the "snapshot" event followed by the charts' "series"
// event (no id of its own: a resume point is always after both).
func (h *hub) snapshotFrame() *frame {
	id, s, ser := h.snapshot()
	data, err := marshal(s)
	if err != nil {
		h.cfg.log.Error("webui: encode snapshot", "err", err)
		data = []byte(`{}`)
	}
	out := h.encode(id, "snapshot", data)
	if sd, err := marshal(ser); err == nil {
		out = append(out, "event: series\ndata: "...)
		out = append(append(out, sd...), "\n\n"...)
	} else {
		h.cfg.log.Error("webui: encode series", "err", err)
	}
	return &frame{id: id, data: out}
}

func (h *hub) flowList(frontend string, limit int) (int, []Flow) {
	h.mu.Lock()
	raw := make([]proxy.Flow, 0, len(h.flows))
	for _, e := range h.flows {
		if frontend == "" || e.f.Frontend.String() == frontend {
			raw = append(raw, e.f)
		}
	}
	h.mu.Unlock()
	return len(raw), newestFlows(raw, limit)
}

func (h *hub) stats() []VIPStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agg.all()
}
