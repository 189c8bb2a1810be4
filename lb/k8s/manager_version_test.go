package k8s

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestManagerVersionFollowsLists reads the Manager as the web UI does: it
// lists again only when Version moved since the last list (version read
// before the lists). Every change the lists can show — a new Service, one
// left pending with its reason, one deleted and the pending one served, a
// new IPPool, one removed — must reach that reader; a change without a
// version bump would leave it stale and the wait below would time out.
func TestManagerVersionFollowsLists(t *testing.T) {
	c, cs, dyn, ctx := leadingFake(t, nil, poolObj("small", 0, "192.0.2.0/31"))

	m := c.Manager()
	vm, ok := m.(interface{ Version() uint64 })
	if !ok {
		t.Fatal("the Kubernetes Manager has no Version")
	}
	var (
		mu     sync.Mutex
		seen   string // the lists as the reader last listed them
		lists  int
		polls  int
		haveV  bool
		lastV  uint64
		stopCh = make(chan struct{})
	)
	poll := func() {
		v := vm.Version()
		mu.Lock()
		defer mu.Unlock()
		polls++
		if haveV && v == lastV {
			return
		}
		ps, _ := m.Pools(ctx)
		ss, _ := m.Services(ctx)
		b, _ := json.Marshal(map[string]any{"pools": ps, "services": ss})
		seen, lastV, haveV = string(b), v, true
		lists++
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopCh:
				return
			case <-tk.C:
				poll()
			}
		}
	}()
	t.Cleanup(func() { close(stopCh); wg.Wait() })
	shows := func(what string, all ...string) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range all {
				if !strings.Contains(seen, s) {
					return false
				}
			}
			return true
		})
	}
	lacks := func(what, s string) {
		t.Helper()
		waitFor(t, 30*time.Second, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !strings.Contains(seen, s)
		})
	}

	for _, n := range []string{"a", "b", "c"} {
		if _, err := cs.CoreV1().Services("default").Create(ctx, lbService(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Two addresses, three Services: one waits, with the allocator's reason.
	shows("three Services, two served, one pending with its reason", `"default/a"`, `"default/b"`, `"default/c"`,
		`"192.0.2.0"`, `"192.0.2.1"`, "no address available")
	if err := cs.CoreV1().Services("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lacks("the deleted Service gone", `"default/a"`)
	lacks("the pending one served", "no address available")
	if _, err := dyn.Resource(IPPoolGVR).Create(ctx, poolObj("more", time.Second, "198.51.100.0/30"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	shows("the new IPPool", `"more"`)
	if err := dyn.Resource(IPPoolGVR).Delete(ctx, "more", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lacks("the removed IPPool", `"more"`)

	// Quiet: the reader stops listing while nothing changes. Counted in
	// polls, not in wall time (a busy machine runs few polls in 300 ms),
	// and once the controller has settled after the last change: a window
	// of 50 polls in a row without a list must come within 30 s (with a
	// version bump on every poll or every few, it never would).
	const quiet = 50
	var l0, p0 int
	read := func() (int, int) { mu.Lock(); defer mu.Unlock(); return lists, polls }
	l0, p0 = read()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d polls in a row without a list", quiet), func() bool {
		l, p := read()
		if l != l0 { // still settling: start the window again
			l0, p0 = l, p
			return false
		}
		return p-p0 >= quiet
	})
	l1, p1 := read()
	t.Logf("%d lists for %d polls; the last %d polls listed nothing", l1, p1, p1-p0)
}
