package webui

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

func (f *fakeFlows) watcherCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watchers)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
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
