package webui

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func testHub() *hub {
	return newHub(hubConfig{batch: time.Hour, queueFrames: 4, queueBytes: 1 << 20,
		historyBytes: 1 << 20, maxSnapFlows: 100, now: time.Now, log: slog.Default()})
}

func TestHubCoalescesAStalledClient(t *testing.T) {
	h := testHub()
	c := h.register("")
	if q, resync := c.take(); !resync || len(q) != 0 {
		t.Fatalf("a new client starts with a snapshot: q=%d resync=%v", len(q), resync)
	}
	for i := 0; i < 3; i++ {
		h.publish("pools", []byte(`[`+strings.Repeat("1,", i)+`1]`))
	}
	if f, _, r := c.pending(); f != 3 || r {
		t.Fatalf("queued %d resync=%v", f, r)
	}
	for i := 3; i < 10; i++ {
		h.publish("pools", []byte(`[`+strings.Repeat("1,", i)+`1]`))
	}
	f, b, r := c.pending()
	if f != 0 || b != 0 || !r || h.resyncs != 1 {
		t.Fatalf("after overflow: %d frames %d bytes resync=%v resyncs=%d", f, b, r, h.resyncs)
	}
	// The writer then sends one snapshot instead of the 10 frames.
	if q, resync := c.take(); len(q) != 0 || !resync {
		t.Fatalf("take: %d %v", len(q), resync)
	}
	h.unregister(c)
	if h.clientCount() != 0 {
		t.Fatal("client still registered")
	}
}

func TestHubByteBoundAndHistory(t *testing.T) {
	h := testHub()
	h.cfg.queueFrames, h.cfg.queueBytes, h.cfg.historyBytes = 100, 1000, 2000
	c := h.register("")
	c.take()
	big := []byte(`"` + strings.Repeat("x", 600) + `"`)
	h.publish("announce", big)
	if f, _, r := c.pending(); f != 1 || r {
		t.Fatalf("first frame: %d %v", f, r)
	}
	h.publish("announce", append(big, ' '))
	if _, _, r := c.pending(); !r {
		t.Fatal("byte bound not enforced")
	}
	for i := 0; i < 10; i++ {
		h.publish("announce", append(big, []byte(strings.Repeat(" ", i+2))...))
	}
	if h.histBytes > 2000 || len(h.history) > 3 {
		t.Fatalf("history %d frames %d bytes over its bound", len(h.history), h.histBytes)
	}
}

// TestHubResyncDoesNotUndoNewerEvents: a dump taken before an event must
// neither revive a flow the event destroyed nor drop one it created.
func TestHubResyncDoesNotUndoNewerEvents(t *testing.T) {
	h := testHub()
	a := testFlow(1, "198.51.100.2:8080", 10, 10)
	b := testFlow(2, "198.51.100.3:8080", 10, 10)
	gone := testFlow(3, "198.51.100.4:8080", 10, 10)
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowNew, Flow: a})
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowNew, Flow: gone})

	gen := h.beginResync()
	dump := []proxy.Flow{a, gone} // taken now; then, before it is applied:
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: gone})
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowNew, Flow: b})
	h.applySnapshot(dump, gen)
	if _, ok := h.flows[3]; ok {
		t.Fatal("stale dump revived a destroyed flow")
	}
	if _, ok := h.flows[2]; !ok {
		t.Fatal("stale dump dropped a flow created after it")
	}
	st := h.stats()
	if len(st) != 1 || st[0].Current != 2 || st[0].Total != 3 {
		t.Fatalf("aggregates %+v", st)
	}
	// The next dump is authoritative: flows it lacks (and no newer event touched) go.
	gen = h.beginResync()
	h.applySnapshot([]proxy.Flow{b}, gen)
	if len(h.flows) != 1 || h.stats()[0].Current != 1 || h.stats()[0].Total != 3 {
		t.Fatalf("after authoritative dump: %d flows, %+v", len(h.flows), h.stats())
	}
}

func TestHubDeltaNetsOutChanges(t *testing.T) {
	h := testHub()
	c := h.register("")
	c.take()
	old := testFlow(1, "198.51.100.2:8080", 10, 10)
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowNew, Flow: old})
	h.flush()
	c.take()
	brief := testFlow(2, "198.51.100.2:8080", 10, 10)
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowNew, Flow: brief})
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowDestroy, Flow: brief})
	upd := old
	upd.OrigBytes = 500
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: upd})
	h.flowEvent(proxy.FlowEvent{Type: proxy.FlowUpdate, Flow: upd}) // no change: nothing
	h.flush()
	q, _ := c.take()
	if len(q) != 1 {
		t.Fatalf("%d frames", len(q))
	}
	data := string(q[0].data)
	if !strings.Contains(data, `"new":[]`) || !strings.Contains(data, `"destroy":[]`) || !strings.Contains(data, `"bytesIn":500`) ||
		!strings.Contains(data, `"total":2`) {
		t.Fatalf("delta %s", data)
	}
}

// versionedManager counts list calls and reports a version it is told.
type versionedManager struct {
	*fakeManager
	version uint64
	lists   int
}

func (m *versionedManager) Version() uint64 { return m.version }

func (m *versionedManager) Services(ctx context.Context) ([]lb.ServiceStatus, error) {
	m.lists++
	return m.fakeManager.Services(ctx)
}

// A versioned Manager is listed (and its services encoded) only when its
// version moved; the published JSON is kept once, inside its frame.
func TestHubRefreshSkipsUnchangedVersion(t *testing.T) {
	h := testHub()
	m := &versionedManager{fakeManager: newFakeManager(), version: 7}
	m.services["a"] = lb.ServiceStatus{Spec: lb.ServiceSpec{Name: "a"}}
	ctx := context.Background()
	h.refreshState(ctx, m, nil)
	h.refreshState(ctx, m, nil)
	if m.lists != 1 {
		t.Fatalf("listed %d times at one version, want 1", m.lists)
	}
	m.version++
	m.services["b"] = lb.ServiceStatus{Spec: lb.ServiceSpec{Name: "b"}}
	h.refreshState(ctx, m, nil)
	if m.lists != 2 {
		t.Fatalf("listed %d times after a version change, want 2", m.lists)
	}
	got := string(h.state["services"])
	if !strings.Contains(got, `"name":"a"`) || !strings.Contains(got, `"name":"b"`) || !strings.HasSuffix(got, "]") {
		t.Fatalf("services state: %s", got)
	}
	last := h.history[len(h.history)-1]
	if !strings.Contains(string(last.data), got) || &h.state["services"][0] != &last.data[len(last.data)-len(got)-2] {
		t.Fatal("the state is not the frame's own bytes")
	}
}

// pending is what a client has queued (frames, bytes) and whether it must resync.
func (c *client) pending() (frames, bytes int, resync bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.q), c.qBytes, c.resync
}
