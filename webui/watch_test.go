package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func (f *fakeFlows) watcherCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); { // a hang guard, not a goal
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Conntrack events are followed only while a live view is open (every
// listener makes the kernel build an event per connection through the
// host), and for FlowWatchIdle after it closes; REST reads between viewers
// dump on demand, so they are current anyway.
func TestFlowWatchOnlyWhileViewed(t *testing.T) {
	m := newFakeManager()
	src := newFakeFlows()
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(1, "198.51.100.1:8080", 10, 20)})
	_, ts := startServer(t, m, func(o *Options) {
		o.Flows, o.FlowResync, o.FlowWatchIdle = src, time.Hour, 50*time.Millisecond
	})
	time.Sleep(100 * time.Millisecond)
	if n := src.watcherCount(); n != 0 {
		t.Fatalf("%d watches with no viewer, want 0", n)
	}
	// A flow born with nobody watching: REST still lists it (dump on demand).
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(2, "198.51.100.2:8080", 1, 2)})
	time.Sleep(freshAfter) // REST readers share a dump younger than this
	if got := restFlows(t, ts.URL); got != 2 {
		t.Fatalf("REST lists %d flows, want 2", got)
	}

	st := openStream(t, ts.URL, "")
	st.next(t, "snapshot")
	waitUntil(t, "a watch while the stream is open", func() bool { return src.watcherCount() == 1 })
	src.Emit(proxy.FlowEvent{Type: proxy.FlowNew, Flow: testFlow(3, "198.51.100.1:8080", 5, 5)})
	if d := st.next(t, "delta"); !json.Valid([]byte(d.data)) {
		t.Fatalf("delta: %s", d.data)
	}
	st.close()
	waitUntil(t, "the watch to stop after the viewer left", func() bool { return src.watcherCount() == 0 })
}

// A negative FlowWatchIdle follows events always.
func TestFlowWatchAlways(t *testing.T) {
	src := newFakeFlows()
	startServer(t, newFakeManager(), func(o *Options) { o.Flows, o.FlowWatchIdle = src, -1 })
	waitUntil(t, "a watch with no viewer", func() bool { return src.watcherCount() == 1 })
}

func restFlows(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/v1/flows", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var fl FlowList
	if err := json.NewDecoder(resp.Body).Decode(&fl); err != nil {
		t.Fatal(err)
	}
	return fl.Total
}

// The pools/services state follows viewers as the flow watch does: nobody
// streaming, no listing and no JSON kept; a stream starts with the whole
// state (read on the spot); after the last viewer leaves and FlowWatchIdle
// passes, state and frame history are dropped and listing stops again.
func TestStateOnlyWhileViewed(t *testing.T) {
	m := newFakeManager()
	m.seed(t)
	s, ts := startServer(t, m, func(o *Options) { o.FlowWatchIdle = 100 * time.Millisecond })
	lists := func() uint64 {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return s.hub.lists
	}
	held := func() (int, int) {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return len(s.hub.state["services"]), len(s.hub.history)
	}
	time.Sleep(300 * time.Millisecond) // six polls
	if n := lists(); n != 0 {
		t.Fatalf("%d Manager reads with no viewer, want 0", n)
	}
	if svc, hist := held(); svc > 2 || hist > 0 {
		t.Fatalf("with no viewer the hub holds %d bytes of services and %d frames", svc, hist)
	}

	st := openStream(t, ts.URL, "")
	snap := st.next(t, "snapshot")
	if !strings.Contains(snap.data, `"web"`) || !strings.Contains(snap.data, `"192.0.2.0/24"`) {
		t.Fatalf("first snapshot lacks the state: %s", snap.data)
	}
	// While viewed, changes arrive as they did.
	if _, _, err := m.PutService(context.Background(), lb.ServiceSpec{Name: "api", Ports: []lb.PortSpec{{Port: 443, Protocol: proxy.TCP}}}); err != nil {
		t.Fatal(err)
	}
	if ev := st.next(t, "services"); !strings.Contains(ev.data, `"api"`) {
		t.Fatalf("services event: %s", ev.data)
	}
	st.close()
	waitUntil(t, "state and history dropped after the viewer left", func() bool {
		svc, hist := held()
		return svc <= 2 && hist == 0
	})
	n := lists()
	time.Sleep(300 * time.Millisecond)
	if got := lists(); got != n {
		t.Fatalf("%d Manager reads after the viewer left, want 0", got-n)
	}
	// A viewer coming back gets everything again.
	st = openStream(t, ts.URL, "")
	if snap := st.next(t, "snapshot"); !strings.Contains(snap.data, `"api"`) {
		t.Fatalf("snapshot after the idle drop lacks the state: %s", snap.data)
	}
	st.close()
}
