package webui

import (
	"context"
	"net/netip"
	"time"
)

// The charts' history: every SeriesStep the hub samples its per-VIP and
// per-backend aggregates into a bounded ring per key (SeriesLen samples =
// 15 minutes). A sample is what happened in that step — new connections,
// bytes both ways — and the live connections at its end: 16 bytes, so a key
// with a full window costs 180 × 16 B ≈ 2.9 KB. Like the rest of the live
// view it exists only while someone views the stream: dropState drops it,
// and a key whose window holds nothing but zeros gives its buffer back.

const (
	// SeriesStep is the time between two samples of the charts.
	SeriesStep = 5 * time.Second
	// SeriesLen is how many samples a chart keeps: 15 minutes.
	SeriesLen = 180
)

// sample is one step of one key. Counts, not rates: the page divides by
// the step, and sums of counts compare exactly with the counters.
type sample struct {
	conns  uint32 // connections that began in the step
	active uint32 // live connections at the end of the step
	bytes  uint64 // bytes both ways moved in the step
}

// ring is a fixed-capacity FIFO of samples; base holds the cumulative
// counters just before its oldest sample, so base + Σ samples equals the
// aggregate at the newest one.
type ring struct {
	buf        []sample // grows to SeriesLen, then wraps
	head       int      // index of the oldest sample once full
	baseConns  uint64
	baseBytes  uint64
	lastConns  uint64 // cumulative values at the newest sample
	lastBytes  uint64
	quietSince int // samples in a row with nothing in them
}

func newRing(conns, bytes uint64) *ring {
	return &ring{baseConns: conns, baseBytes: bytes, lastConns: conns, lastBytes: bytes}
}

// push appends the sample for cumulative counters c at the end of a step.
// The aggregates can step back (a dump older than an event lowers a flow's
// bytes for a moment): such a step counts 0 and the base moves down instead,
// so base + Σ still equals the counters and no rate is ever negative.
func (r *ring) push(c Counters) {
	total, bytes := c.Total, c.BytesIn+c.BytesOut
	s := sample{active: clamp32(uint64(max(c.Current, 0)))}
	if total >= r.lastConns {
		s.conns = clamp32(total - r.lastConns)
	} else {
		r.baseConns -= min(r.baseConns, r.lastConns-total)
	}
	if bytes >= r.lastBytes {
		s.bytes = bytes - r.lastBytes
	} else {
		r.baseBytes -= min(r.baseBytes, r.lastBytes-bytes)
	}
	r.lastConns, r.lastBytes = total, bytes
	if s == (sample{}) {
		r.quietSince++
		if len(r.buf) == 0 {
			r.baseConns, r.baseBytes = total, bytes
			return // released (quiet) and still quiet: stays empty
		}
	} else {
		r.quietSince = 0
	}
	if len(r.buf) < SeriesLen {
		if len(r.buf) == cap(r.buf) {
			// Grow by doubling but never past the window: append would
			// round 180 up to 256 samples (4 KiB instead of 2.9).
			nb := make([]sample, len(r.buf), min(max(2*cap(r.buf), 8), SeriesLen))
			copy(nb, r.buf)
			r.buf = nb
		}
		r.buf = append(r.buf, s)
		return
	}
	old := r.buf[r.head]
	r.baseConns += uint64(old.conns)
	r.baseBytes += old.bytes
	r.buf[r.head] = s
	r.head = (r.head + 1) % SeriesLen
}

// release frees the buffer of a quiet ring; the ring stays (~100 B) so it
// knows where the counters stand when traffic comes back. The aggregates
// themselves are kept for ever (they are the totals), so the ring is too.
func (r *ring) release() {
	r.buf, r.head = nil, 0
	r.baseConns, r.baseBytes = r.lastConns, r.lastBytes
}

// quiet reports whether the whole window is zeros (the key can go).
func (r *ring) quiet() bool { return r.quietSince >= SeriesLen }

// samples returns the window oldest first.
func (r *ring) samples() []sample {
	out := make([]sample, 0, len(r.buf))
	out = append(out, r.buf[r.head:]...)
	return append(out, r.buf[:r.head]...)
}

func clamp32(v uint64) uint32 {
	if v > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(v)
}

type seriesKey struct {
	vip     vipKey
	backend netip.AddrPort // zero: the VIP itself
}

// seriesStore is the hub's chart history (under hub.mu).
type seriesStore struct {
	started bool
	times   []time.Time // end of each step, same ring layout as every key's
	head    int
	rings   map[seriesKey]*ring
}

func newSeriesStore() *seriesStore { return &seriesStore{rings: map[seriesKey]*ring{}} }

// take samples every aggregate at now. The first call only records where
// the counters stand (what happened before anyone looked is not charted);
// keys that appear later start from zero, since the aggregates were born
// after that.
func (s *seriesStore) take(a *aggregates, now time.Time) {
	if !s.started {
		s.started = true
		a.each(func(k seriesKey, c Counters) { s.rings[k] = newRing(c.Total, c.BytesIn+c.BytesOut) })
		return
	}
	if len(s.times) < SeriesLen {
		s.times = append(s.times, now)
	} else {
		s.times[s.head] = now
		s.head = (s.head + 1) % SeriesLen
	}
	a.each(func(k seriesKey, c Counters) {
		r := s.rings[k]
		if r == nil {
			r = newRing(0, 0)
			s.rings[k] = r
		}
		r.push(c)
	})
	for _, r := range s.rings {
		if r.quiet() && r.buf != nil {
			r.release()
		}
	}
}

// each calls fn for every VIP (backend zero) and every backend aggregate.
func (a *aggregates) each(fn func(seriesKey, Counters)) {
	for k, v := range a.vips {
		fn(seriesKey{vip: k}, v.Counters)
		for be, c := range v.backends {
			fn(seriesKey{vip: k, backend: be}, *c)
		}
	}
}

// Series is the charts' history in the snapshot: Times are the ends of the
// steps, oldest first; each line's Points are aligned to the newest time (a
// line that began later is shorter).
type Series struct {
	Step  float64     `json:"step"` // seconds
	Times []time.Time `json:"times"`
	VIPs  []SeriesVIP `json:"vips"`
}

// SeriesVIP is one frontend's line and its backends' lines.
type SeriesVIP struct {
	Frontend string       `json:"frontend"`
	Protocol string       `json:"protocol"`
	Line     SeriesLine   `json:"line"`
	Backends []SeriesLine `json:"backends"`
}

// SeriesLine is one key's window. Points are [conns, active, bytes] per
// step; BaseConns/BaseBytes are the cumulative counters just before the
// first point, so BaseConns + Σ conns = the aggregate's total at the last.
type SeriesLine struct {
	Backend   string      `json:"backend,omitempty"`
	BaseConns uint64      `json:"baseConns"`
	BaseBytes uint64      `json:"baseBytes"`
	Points    [][3]uint64 `json:"points"`
}

// SeriesFrame is the "sample" event: the newest step of every key that is
// still charted. The page appends it (a charted key missing from it had
// nothing: zeros) and drops points older than SeriesLen.
type SeriesFrame struct {
	Time time.Time   `json:"time"`
	Step float64     `json:"step"`
	VIPs []SeriesVIP `json:"vips"`
}

func lineOf(backend string, r *ring, last int) SeriesLine {
	ss := r.samples()
	if last > 0 && len(ss) > last {
		// Only the newest `last` points; move the base past the rest.
		l := SeriesLine{Backend: backend, BaseConns: r.baseConns, BaseBytes: r.baseBytes}
		for _, s := range ss[:len(ss)-last] {
			l.BaseConns += uint64(s.conns)
			l.BaseBytes += s.bytes
		}
		ss = ss[len(ss)-last:]
		l.Points = points(ss)
		return l
	}
	return SeriesLine{Backend: backend, BaseConns: r.baseConns, BaseBytes: r.baseBytes, Points: points(ss)}
}

func points(ss []sample) [][3]uint64 {
	out := make([][3]uint64, len(ss))
	for i, s := range ss {
		out[i] = [3]uint64{uint64(s.conns), uint64(s.active), s.bytes}
	}
	return out
}

// view renders the store: the whole window (last = 0) or only the newest
// `last` points of every key with something in them.
func (s *seriesStore) view(last int) []SeriesVIP {
	byVIP := map[vipKey]*SeriesVIP{}
	keys := []vipKey{}
	get := func(k vipKey) *SeriesVIP {
		v := byVIP[k]
		if v == nil {
			v = &SeriesVIP{Frontend: k.Frontend.String(), Protocol: k.Protocol.String(), Backends: []SeriesLine{}}
			byVIP[k] = v
			keys = append(keys, k)
		}
		return v
	}
	for k, r := range s.rings {
		if len(r.buf) == 0 || (last > 0 && r.quietSince >= last) {
			continue
		}
		v := get(k.vip)
		if k.backend.IsValid() {
			v.Backends = append(v.Backends, lineOf(k.backend.String(), r, last))
		} else {
			v.Line = lineOf("", r, last)
		}
	}
	sortKeys(keys)
	out := make([]SeriesVIP, 0, len(keys))
	for _, k := range keys {
		v := byVIP[k]
		sortLines(v.Backends)
		out = append(out, *v)
	}
	return out
}

func sortLines(ls []SeriesLine) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Backend < ls[j-1].Backend; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// timesOldestFirst returns the step ends in order.
func (s *seriesStore) timesOldestFirst() []time.Time {
	out := make([]time.Time, 0, len(s.times))
	out = append(out, s.times[s.head:]...)
	return append(out, s.times[:s.head]...)
}

// runSeries closes a chart step every step while the live view is wanted
// (a viewer, or the idle time after the last one); between viewers nothing
// is sampled and dropState forgets the history.
func (h *hub) runSeries(ctx context.Context, step time.Duration) {
	every(ctx, step, func() {
		if h.wantState() {
			h.sampleSeries()
		}
	})
}
