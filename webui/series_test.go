package webui

import (
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// The ring keeps SeriesLen samples; base + Σ conns and base + Σ bytes
// always equal the cumulative counters at the newest sample, also after
// it wrapped.
func TestSeriesRingWrapKeepsSums(t *testing.T) {
	r := newRing(7, 100)
	var c Counters
	c.Total, c.BytesIn = 7, 100
	for i := 1; i <= SeriesLen+37; i++ {
		c.Total += uint64(i % 5)
		c.BytesIn += uint64(1000 * i)
		c.BytesOut += 3
		c.Current = int64(i % 9)
		r.push(c)
		ss := r.samples()
		if want := min(i, SeriesLen); len(ss) != want {
			t.Fatalf("after %d pushes: %d samples, want %d", i, len(ss), want)
		}
		conns, bytes := r.baseConns, r.baseBytes
		for _, s := range ss {
			conns += uint64(s.conns)
			bytes += s.bytes
		}
		if conns != c.Total || bytes != c.BytesIn+c.BytesOut {
			t.Fatalf("after %d pushes: base+Σ = %d conns, %d bytes; counters %d, %d", i, conns, bytes, c.Total, c.BytesIn+c.BytesOut)
		}
		newest := ss[len(ss)-1]
		if newest.active != uint32(c.Current) || newest.conns != uint32(i%5) || newest.bytes != uint64(1000*i+3) {
			t.Fatalf("after %d pushes: newest %+v", i, newest)
		}
	}
}

// Counters that step back make a zero sample and lower the base: no
// negative (or wrapped) rate, and base + Σ still equals the counters.
func TestSeriesRingCountersStepBack(t *testing.T) {
	r := newRing(0, 0)
	r.push(Counters{Total: 10, BytesIn: 5000})
	r.push(Counters{Total: 10, BytesIn: 4200}) // a stale dump
	r.push(Counters{Total: 11, BytesIn: 4300})
	ss := r.samples()
	if ss[1].bytes != 0 || ss[2].bytes != 100 || ss[2].conns != 1 {
		t.Fatalf("samples %+v", ss)
	}
	var bytes uint64
	for _, s := range ss {
		bytes += s.bytes
	}
	if r.baseBytes != 0 || bytes != 5100 {
		// base is clamped at 0: the 800 bytes taken back stay drawn.
		t.Fatalf("base %d, Σ %d", r.baseBytes, bytes)
	}
	r2 := newRing(3, 1000)
	r2.push(Counters{Total: 3, BytesIn: 900})
	if r2.baseBytes != 900 || len(r2.samples()) != 0 { // nothing moved: an empty ring stays empty
		t.Fatalf("base %d, samples %+v", r2.baseBytes, r2.samples())
	}
}

func TestSeriesRingQuietAndClamp(t *testing.T) {
	r := newRing(0, 0)
	r.push(Counters{Total: 1})
	for i := 0; i < SeriesLen-1; i++ {
		r.push(Counters{Total: 1})
		if r.quiet() {
			t.Fatalf("quiet after %d zero samples with a connection still in the window", i+1)
		}
	}
	r.push(Counters{Total: 1})
	if !r.quiet() {
		t.Fatal("a window of zeros is not quiet")
	}
	r.push(Counters{Total: 1 + 1<<33, Current: -1})
	if s := r.samples()[SeriesLen-1]; s.conns != 1<<32-1 || s.active != 0 {
		t.Fatalf("clamped sample %+v", s)
	}
}

// The store: the first take is a baseline (no points), later keys start at
// zero, views are sorted, a sample view holds only keys that moved, and a
// key quiet for the whole window is dropped.
func TestSeriesStoreTakeAndView(t *testing.T) {
	a := newAggregates()
	vip := netip.MustParseAddrPort("192.0.2.10:80")
	be1 := netip.MustParseAddrPort("10.0.0.1:8080")
	be2 := netip.MustParseAddrPort("10.0.0.2:8080")
	fl := func(id uint64, be netip.AddrPort, bytes uint64) proxy.Flow {
		return proxy.Flow{ID: id, Protocol: proxy.TCP, Frontend: vip, Backend: be, OrigBytes: bytes}
	}
	a.add(fl(1, be1, 10)) // before anyone looked: baseline only
	s := newSeriesStore()
	t0 := time.Unix(1000, 0)
	s.take(a, t0)
	if len(s.times) != 0 || len(s.view(0)) != 0 {
		t.Fatalf("baseline made points: %v %+v", s.times, s.view(0))
	}
	a.add(fl(2, be1, 5))
	a.add(fl(3, be2, 7))
	s.take(a, t0.Add(SeriesStep))
	v := s.view(0)
	if len(v) != 1 || v[0].Frontend != vip.String() || len(v[0].Backends) != 2 {
		t.Fatalf("view %+v", v)
	}
	if l := v[0].Line; l.BaseConns != 1 || l.BaseBytes != 10 || len(l.Points) != 1 || l.Points[0] != [3]uint64{2, 3, 12} {
		t.Fatalf("VIP line %+v", l)
	}
	b1, b2 := v[0].Backends[0], v[0].Backends[1]
	if b1.Backend != be1.String() || b1.Points[0] != [3]uint64{1, 2, 5} || b1.BaseConns != 1 {
		t.Fatalf("backend 1 line %+v", b1)
	}
	if b2.Backend != be2.String() || b2.Points[0] != [3]uint64{1, 1, 7} || b2.BaseConns != 0 {
		t.Fatalf("backend 2 line %+v", b2)
	}
	a.remove(fl(3, be2, 7))
	a.remove(fl(1, be1, 10))
	a.remove(fl(2, be1, 5))
	s.take(a, t0.Add(2*SeriesStep))
	s.take(a, t0.Add(3*SeriesStep))
	if last := s.view(1); len(last) != 0 {
		t.Fatalf("sample view of a step where nothing happened: %+v", last)
	}
	if got := s.timesOldestFirst(); len(got) != 3 || !got[2].Equal(t0.Add(3*SeriesStep)) {
		t.Fatalf("times %v", got)
	}
	for i := 0; i < SeriesLen; i++ {
		s.take(a, t0.Add(time.Duration(4+i)*SeriesStep))
	}
	for k, r := range s.rings {
		if r.buf != nil {
			t.Fatalf("after a quiet window the ring of %+v still holds %d samples", k, len(r.buf))
		}
	}
	if len(s.view(0)) != 0 || len(s.times) != SeriesLen {
		t.Fatalf("after a quiet window: view %+v, %d times", s.view(0), len(s.times))
	}
	// Traffic again: the released ring starts from where the counters stand.
	a.add(fl(4, be2, 1))
	s.take(a, t0.Add(time.Duration(4+SeriesLen)*SeriesStep))
	v = s.view(0)
	if len(v) != 1 || len(v[0].Backends) != 1 || v[0].Backends[0].BaseConns != 1 || v[0].Backends[0].Points[0] != [3]uint64{1, 1, 1} {
		t.Fatalf("after traffic came back: %+v", v)
	}
	got := s.timesOldestFirst()
	for i := 1; i < len(got); i++ {
		if !got[i].After(got[i-1]) {
			t.Fatalf("times out of order at %d: %v", i, got[i-1:i+1])
		}
	}
}

// BenchmarkSeriesMemory measures the charts' history at its worst: 10,000
// VIPs (EDGELB_BENCH_SERVICES) with 3 backends each, every key busy in every
// step of a full 15-minute window. It reports the heap the store holds and
// the time of one step.
//
//	go test -run '^$' -bench BenchmarkSeriesMemory -benchtime 1x ./webui
func BenchmarkSeriesMemory(b *testing.B) {
	services := 10000
	if v, err := strconv.Atoi(os.Getenv("EDGELB_BENCH_SERVICES")); err == nil && v > 0 {
		services = v
	}
	for range b.N {
		a := newAggregates()
		var id uint64
		addAll := func() {
			for i := range services {
				vip := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 80)
				for j := range 3 {
					id++
					be := netip.AddrPortFrom(netip.AddrFrom4([4]byte{172, 16, byte(j), 1}), uint16(1000+i%50000))
					a.add(proxy.Flow{ID: id, Protocol: proxy.TCP, Frontend: vip, Backend: be, OrigBytes: 100})
				}
			}
		}
		addAll()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := newSeriesStore()
		t0 := time.Unix(0, 0)
		s.take(a, t0)
		var stepTime time.Duration
		for k := 1; k <= SeriesLen; k++ {
			addAll()
			start := time.Now()
			s.take(a, t0.Add(time.Duration(k)*SeriesStep))
			stepTime += time.Since(start)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		held := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		frame, _ := marshal(SeriesFrame{VIPs: s.view(1)})
		b.ReportMetric(held, "MiB-held")
		b.ReportMetric(float64(len(s.rings)), "keys")
		b.ReportMetric(float64(stepTime.Milliseconds())/SeriesLen, "ms/step")
		b.ReportMetric(float64(len(frame))/(1<<20), "MiB/sample-event")
		whole, _ := marshal(Series{VIPs: s.view(0)})
		b.ReportMetric(float64(len(whole))/(1<<20), "MiB/series-event")
	}
}
