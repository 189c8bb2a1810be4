package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

type sseEvent struct {
	id, event, data string
	at              time.Time
}

// stream is a test SSE client.
type stream struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

func openStream(t testing.TB, url, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/v1/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	s := &stream{resp: resp, events: make(chan sseEvent, 256), cancel: cancel}
	go func() {
		defer close(s.events)
		readEvents(bufio.NewReaderSize(resp.Body, 16<<10), func(e sseEvent) { s.events <- e })
	}()
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() { s.cancel(); s.resp.Body.Close() }

// readEvents parses an SSE stream; comment lines come out as event ":".
func readEvents(r *bufio.Reader, fn func(sseEvent)) {
	var e sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if e.event != "" || e.data != "" {
				e.at = time.Now()
				fn(e)
			}
			e = sseEvent{}
		case strings.HasPrefix(line, ":"):
			fn(sseEvent{event: ":", data: line, at: time.Now()})
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}

func (s *stream) next(t testing.TB, event string) sseEvent {
	t.Helper()
	// Only a hang guard: a loaded machine has delayed events by seconds.
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatalf("stream ended waiting for %q", event)
			}
			if e.event == event {
				return e
			}
		case <-timeout:
			t.Fatalf("no %q event within 30 s", event)
		}
	}
}

func testFlow(id uint64, backend string, in, out uint64) proxy.Flow {
	return proxy.Flow{ID: id, Protocol: proxy.TCP, Client: netip.AddrPortFrom(netip.MustParseAddr("203.0.113.7"), uint16(30000+id)),
		Frontend: netip.MustParseAddrPort("192.0.2.10:80"), Backend: netip.MustParseAddrPort(backend),
		State: "ESTABLISHED", Start: time.Now(), OrigBytes: in, ReplyBytes: out, OrigPackets: 1, ReplyPackets: 1}
}

func TestStreamSnapshotThenDeltas(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	src := newFakeFlows()
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(1, "198.51.100.2:8080", 100, 1000)})
	_, ts := startServer(t, m, func(o *Options) { o.Flows = src })
	st := openStream(t, ts.URL, "")

	var snap Snapshot
	if err := json.Unmarshal([]byte(st.next(t, "snapshot").data), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Flows) != 1 || snap.FlowsTotal != 1 || len(snap.Stats) != 1 || snap.Stats[0].Current != 1 ||
		!strings.Contains(string(snap.Pools), `"default"`) || !strings.Contains(string(snap.Services), `"192.0.2.10"`) ||
		!strings.Contains(string(snap.Announce), `"Established"`) {
		t.Fatalf("snapshot %+v", snap)
	}

	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(2, "198.51.100.3:8080", 50, 500)})
	var d Delta
	if err := json.Unmarshal([]byte(st.next(t, "delta").data), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.New) != 1 || d.New[0].ID != 2 || d.New[0].Backend != "198.51.100.3:8080" || len(d.Stats) != 1 ||
		d.Stats[0].Current != 2 || d.Stats[0].Total != 2 || d.Stats[0].BytesIn != 150 || d.Stats[0].BytesOut != 1500 {
		t.Fatalf("delta after new: %+v", d)
	}

	src.Emit(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: testFlow(2, "198.51.100.3:8080", 80, 900)})
	src.Emit(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: testFlow(1, "198.51.100.2:8080", 120, 1100)})
	// Both changes may land in one delta or two: read until both are seen.
	var sawUpdate, sawDestroy bool
	var last VIPStats
	for !(sawUpdate && sawDestroy) {
		d = Delta{}
		if err := json.Unmarshal([]byte(st.next(t, "delta").data), &d); err != nil {
			t.Fatal(err)
		}
		sawUpdate = sawUpdate || (len(d.Update) == 1 && d.Update[0].BytesOut == 900)
		sawDestroy = sawDestroy || (len(d.Destroy) == 1 && d.Destroy[0] == 1)
		last = d.Stats[0]
	}
	// Bytes of the closed flow stay in the totals.
	if last.Current != 1 || last.Total != 2 || last.BytesIn != 120+80 || last.BytesOut != 1100+900 {
		t.Fatalf("aggregates after update+destroy: %+v", last)
	}
	var be3 BackendStats
	for _, b := range last.Backends {
		if b.Backend == "198.51.100.3:8080" {
			be3 = b
		}
	}
	if be3.Current != 1 || be3.Total != 1 || be3.BytesOut != 900 {
		t.Fatalf("backend row %+v", be3)
	}

	// A pool created through the API reaches the stream.
	rec := do(t, ts.Config.Handler, "POST", "/api/v1/pools", `{"name":"extra","addresses":["198.51.100.0/24"]}`, nil)
	if rec.Code != 201 {
		t.Fatalf("create pool: %d %s", rec.Code, rec.Body)
	}
	if e := st.next(t, "pools"); !strings.Contains(e.data, `"extra"`) {
		t.Fatalf("pools event %s", e.data)
	}
}

func TestStreamKeepAliveAndResume(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	src := newFakeFlows()
	s, ts := startServer(t, m, func(o *Options) { o.Flows = src; o.KeepAlive = 50 * time.Millisecond })
	st := openStream(t, ts.URL, "")
	snap := st.next(t, "snapshot")
	if ka := st.next(t, ":"); ka.data != ": keep-alive" {
		t.Fatalf("keep-alive line %q", ka.data)
	}
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(1, "198.51.100.2:8080", 1, 1)})
	d1 := st.next(t, "delta")
	st.close()

	// Missed while disconnected:
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(2, "198.51.100.2:8080", 1, 1)})
	time.Sleep(150 * time.Millisecond)
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(3, "198.51.100.2:8080", 1, 1)})
	waitFor(t, "two more deltas", func() bool {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return len(s.hub.flows) == 3 && len(s.hub.pending) == 0
	})

	// Resume: the missed deltas, in order, and no snapshot.
	st2 := openStream(t, ts.URL, d1.id)
	var got []uint64
	for len(got) < 2 {
		e := <-st2.events
		switch e.event {
		case "snapshot":
			t.Fatalf("resume from %s sent a snapshot", d1.id)
		case "delta":
			var d Delta
			json.Unmarshal([]byte(e.data), &d)
			for _, f := range d.New {
				got = append(got, f.ID)
			}
		}
	}
	if fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("resumed deltas carried flows %v", got)
	}

	// An ID from another boot, or too old, gets a snapshot.
	for _, id := range []string{"deadbeef-3", snap.id[:len(snap.id)-1] + "999999", "garbage"} {
		st3 := openStream(t, ts.URL, id)
		e := <-st3.events
		for e.event == ":" || e.event == "" {
			e = <-st3.events
		}
		if e.event != "snapshot" {
			t.Fatalf("Last-Event-ID %q: first event %q", id, e.event)
		}
		st3.close()
	}
	// Pretend the frame right after d1 aged out (and all before it): a
	// resume from d1 then misses it. Not "keep the last frame only": the
	// deltas of flows 2 and 3 are one frame when a busy machine delays the
	// batch past the sleep between them, and that frame, right after d1,
	// resumes d1 without a snapshot, as it should.
	s.hub.mu.Lock()
	var kept []*frame
	for _, f := range s.hub.history {
		if f.id > seqOf(d1.id)+1 {
			kept = append(kept, f)
		}
	}
	s.hub.history = kept
	s.hub.mu.Unlock()
	st4 := openStream(t, ts.URL, d1.id)
	if e := st4.next(t, "snapshot"); e.id == "" {
		t.Fatal("snapshot without id")
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a goal
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// smallBufListener shrinks the server side's socket send buffer so a
// client that stops reading blocks the server's writes within kilobytes,
// not the megabytes Linux would otherwise buffer.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// TestStreamStalledClient: 100 clients read the stream while one client
// never reads. The stalled one must cost a bounded queue (then a resync
// flag) and never hold up the producer or the others: every other client
// reaches the last delta, in order and without a gap (a stalled client that
// blocked the hub would keep them from it for ever). That no reader is ever
// coalesced is a capacity figure, not a property: on a quiet machine none
// is; with every core busy, readers starved of CPU fall a queue behind and
// get a snapshot, as designed. It is a MEASURED line with its goal (0).
func TestStreamStalledClient(t *testing.T) {
	const clients = 100
	m := newFakeManager()
	m.seed(t)
	src := newFakeFlows()
	s, err := New(Options{Manager: m, Flows: src, RateLimit: -1, PollInterval: time.Second, BatchInterval: 50 * time.Millisecond,
		ClientQueue: 64, ClientQueueBytes: 64 << 10, HistoryBytes: 1 << 20, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { s.Run(ctx); close(runDone) }()
	srv := &http.Server{Handler: s.Handler()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(smallBufListener{ln})
	url := "http://" + ln.Addr().String()

	// The stalled client: a raw socket with a tiny receive buffer that
	// sends the request and never reads.
	// SO_RCVBUF is set before connect so the window is small from the SYN.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return errors.Join(err, serr)
	}}
	stalled, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stalled, "GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	t.Cleanup(func() {
		stalled.Close() // unblocks the server's write to it
		cancel()
		<-runDone
		srv.Close()
	})

	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)

	type result struct {
		deltas, snapshots int
		lastSeq           uint64
		seen              atomic.Uint64 // lastSeq, for the waiting test goroutine
		outOfOrder, gaps  int
		lags              []time.Duration
	}
	results := make([]*result, clients)
	var wg sync.WaitGroup
	streams := make([]*stream, clients)
	for i := range clients {
		streams[i] = openStream(t, url, "")
		r := &result{}
		results[i] = r
		wg.Add(1)
		go func(st *stream) {
			defer wg.Done()
			for e := range st.events {
				if e.id != "" && e.event != "snapshot" && r.snapshots > 0 && seqOf(e.id) != r.lastSeq+1 {
					r.gaps++
				}
				switch e.event {
				case "snapshot":
					r.snapshots++
					r.lastSeq = seqOf(e.id)
				default: // pools, services, announce, and a chart sample every SeriesStep (5 s) of a slow run
					if e.id != "" {
						r.lastSeq = seqOf(e.id)
					}
				case "delta":
					seq := seqOf(e.id)
					if seq <= r.lastSeq {
						r.outOfOrder++
					}
					r.lastSeq = seq
					r.deltas++
					// Delta.Time is the first member: read it without a full decode.
					if i := strings.Index(e.data, `"time":"`); i >= 0 {
						if j := strings.IndexByte(e.data[i+8:], '"'); j > 0 {
							if ts, err := time.Parse(time.RFC3339Nano, e.data[i+8:i+8+j]); err == nil {
								r.lags = append(r.lags, e.at.Sub(ts))
							}
						}
					}
				}
				r.seen.Store(r.lastSeq)
			}
		}(streams[i])
	}
	waitFor(t, "all clients registered", func() bool { return s.hub.clientCount() == clients+1 })

	// Traffic: 40 batches, 50ms apart, each of 50 new flows, 25 updates of
	// the previous batch's flows and 25 destroys of older ones.
	var maxEmit time.Duration
	id := uint64(0)
	backend := func(id uint64) string { return fmt.Sprintf("198.51.100.%d:8080", 2+id%3) }
	start := time.Now()
	for batch := 0; batch < 40; batch++ {
		t0 := time.Now()
		first := id + 1
		for k := 0; k < 50; k++ {
			id++
			src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(id, backend(id), 100, 1000)})
		}
		if batch >= 1 {
			for k := uint64(0); k < 25; k++ {
				u := first - 50 + 2*k
				src.Emit(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: testFlow(u, backend(u), 200, 3000)})
			}
		}
		if batch >= 2 {
			for k := uint64(0); k < 25; k++ {
				d := first - 100 + 2*k + 1
				src.Emit(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: testFlow(d, backend(d), 300, 4000)})
			}
		}
		maxEmit = max(maxEmit, time.Since(t0))
		time.Sleep(50 * time.Millisecond)
	}
	produce := time.Since(start)
	// Let the last batch flush, then note the final sequence number.
	waitFor(t, "last batch flushed", func() bool {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return len(s.hub.pending) == 0
	})
	s.hub.mu.Lock()
	final := s.hub.seq
	s.hub.mu.Unlock()
	waitFor(t, "every client received the final delta", func() bool {
		for _, r := range results {
			if r.seen.Load() < final {
				return false
			}
		}
		return true
	})

	// The stalled client: coalesced, its queue within bounds.
	var stalledQ *client
	s.hub.mu.Lock()
	for c := range s.hub.clients {
		if f, _, resync := c.pending(); resync || f > 0 {
			stalledQ = c
		}
	}
	resyncs := s.hub.resyncs
	s.hub.mu.Unlock()
	if stalledQ == nil || resyncs == 0 {
		t.Fatalf("the stalled client was never coalesced (resyncs=%d)", resyncs)
	}
	qf, qb, resync := stalledQ.pending()
	if qf > 64 || qb > 64<<10 {
		t.Fatalf("stalled client's queue %d frames / %d bytes exceeds its bounds", qf, qb)
	}

	var ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	growth := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	for _, st := range streams {
		st.close()
	}
	wg.Wait()

	var all []time.Duration
	coalesced := 0
	for i, r := range results {
		if r.snapshots < 1 || r.outOfOrder != 0 || r.gaps != 0 {
			t.Errorf("client %d: %d snapshots (want ≥ 1), %d deltas out of order, %d gaps", i, r.snapshots, r.outOfOrder, r.gaps)
		}
		if r.snapshots > 1 {
			coalesced++
		}
		all = append(all, r.lags...)
	}
	t.Logf("MEASURED readers coalesced (fell a queue behind, resynced by a snapshot): %d of %d (goal 0; load average %s)",
		coalesced, clients, loadAvg())
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
	t.Logf("%d flows in %v through %d readers + 1 stalled: %d deltas to the first reader (seq %d), every reader reached the last in order",
		id, produce.Round(time.Millisecond), clients, results[0].deltas, final)
	t.Logf("delivery lag (delta created → read by client) over %d deliveries: p50 %v p99 %v max %v",
		len(all), pct(.5).Round(time.Microsecond), pct(.99).Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
	t.Logf("producer: slowest batch of 100 events took %v; stalled client: coalesced %d time(s), queue now %d frames / %d bytes (resync=%v)",
		maxEmit.Round(time.Microsecond), resyncs, qf, qb, resync)
	t.Logf("heap growth with 101 streams open: %.1f MiB", float64(growth)/(1<<20))
	if growth > 64<<20 {
		t.Errorf("heap grew by %d MiB", growth>>20)
	}
}

func seqOf(id string) uint64 {
	_, s, _ := strings.Cut(id, "-")
	var n uint64
	fmt.Sscan(s, &n)
	return n
}

// loadAvg is /proc/loadavg's 1-minute figure, for MEASURED lines ("?" if
// unreadable).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
