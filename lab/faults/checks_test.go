//go:build netns || k8s

package faults

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
)

// envInt reads a positive integer knob (shorter quick runs), else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// converged compares the gateway's tables with want, retrying for a while
// (the daemon says ready once its first Apply returned, so it is normally
// exact at once); it fails the test with the differences.
func (e *env) converged(step string, want []svcDef) {
	e.t.Helper()
	var probs []string
	var k *kernel
	took, ok := waitFor(20*time.Second, 200*time.Millisecond, func() bool {
		var err error
		if k, err = readKernel(e.lab.Gateway, "ip"); err != nil {
			probs = []string{err.Error()}
			return false
		}
		probs = k.diff(want, []netip.Addr{demo.GatewayFront.Addr()})
		if k6, err := readKernel(e.lab.Gateway, "ip6"); err != nil {
			probs = append(probs, "ip6: "+err.Error())
		} else {
			for _, p := range k6.diff(nil, nil) {
				if !strings.HasPrefix(p, "missing chain") { // an unused family may be bare
					probs = append(probs, "ip6: "+p)
				}
			}
		}
		return len(probs) == 0
	})
	if !ok {
		e.t.Fatalf("%s: kernel differs from the config after %s: %s", step, took.Round(time.Millisecond), summary(probs))
	}
	e.t.Logf("%s: kernel == config: %d frontends, %d elements, 0 missing, 0 stale (read back and compared in %s)",
		step, len(k.vip), k.elements, took.Round(time.Millisecond))
}

// trafficOK sends requests through a few VIPs from the client.
func (e *env) trafficOK(step string, svcs ...svcDef) {
	e.t.Helper()
	c := e.lab.Client.HTTPClient(3 * time.Second)
	for _, s := range svcs {
		url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(s.VIP, s.Port))
		for i := 0; i < 3; i++ {
			if _, err := e.lab.Get(context.Background(), c, url); err != nil {
				e.t.Fatalf("%s: %s: %v", step, url, err)
			}
		}
	}
}

// loadResult is what the client saw.
type loadResult struct {
	mu     sync.Mutex
	total  int
	errs   []string
	counts map[string]int
	hits   []hit // every answer: when it was sent and who answered
}

type hit struct {
	start   time.Time
	backend string
}

// runLoad drives HTTP GETs at url from the client namespace with a fixed
// number of workers (each a new connection: a new scheduling decision at the
// load balancer), each pausing pace between requests, until ctx ends.
func (e *env) runLoad(ctx context.Context, url string, workers int, pace time.Duration) (*loadResult, func()) {
	r := &loadResult{counts: map[string]int{}}
	c := e.lab.Client.HTTPClient(5 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				// The request's own context is not ctx: a request running
				// when the load stops finishes rather than counting as failed.
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				name, err := e.lab.Get(rctx, c, url)
				cancel()
				r.mu.Lock()
				r.total++
				if err != nil {
					r.errs = append(r.errs, fmt.Sprintf("%s: %v", t0.Format("15:04:05.000"), err))
				} else {
					r.counts[name]++
					r.hits = append(r.hits, hit{t0, name})
				}
				r.mu.Unlock()
				time.Sleep(pace)
			}
		}()
	}
	return r, wg.Wait
}
