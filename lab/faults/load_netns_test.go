//go:build netns

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
)

// loadDuration is EDGELB_LOAD_DURATION (a Go duration), default 2 minutes.
func loadDuration(t *testing.T) time.Duration {
	if v := os.Getenv("EDGELB_LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("EDGELB_LOAD_DURATION %q: want a duration of at least 10s", v)
		}
		return d
	}
	return 2 * time.Minute
}

// putService replaces a service through the REST API.
func (e *env) putService(s svcDef) {
	e.t.Helper()
	type be struct {
		Address string `json:"address"`
		Port    uint16 `json:"port"`
		Weight  uint32 `json:"weight"`
	}
	type port struct {
		Name     string `json:"name,omitempty"`
		Port     uint16 `json:"port"`
		NodePort uint16 `json:"nodePort,omitempty"`
	}
	body := struct {
		Name      string   `json:"name"`
		VIPs      []string `json:"vips"`
		Pool      string   `json:"pool,omitempty"`
		Scheduler string   `json:"scheduler,omitempty"`
		Ports     []port   `json:"ports"`
		Backends  []be     `json:"backends"`
	}{Name: s.Name, VIPs: []string{s.VIP.String()}, Pool: s.Pool, Scheduler: s.Scheduler,
		Ports: []port{{Port: s.Port, NodePort: s.NodePort}}, Backends: []be{}}
	for _, b := range s.Backends {
		body.Backends = append(body.Backends, be{b.Addr.Addr().String(), b.Addr.Port(), b.Weight})
	}
	js, _ := json.Marshal(body)
	code, resp := e.rest(http.MethodPut, "/api/v1/services/"+s.Name, string(js))
	if code/100 != 2 {
		e.t.Fatalf("PUT %s: %d %s", s.Name, code, resp)
	}
}

// TestNetnsDrainUnderLoad: 8 clients send HTTP requests through the VIP
// (EDGELB_LOAD_DURATION, default 2 minutes) while backends are drained
// (weight 0 through the REST API), removed, added back and a fourth one
// added and drained: no request fails, and a drained or removed backend
// takes no new connection once the kernel holds the change (read back after
// each PUT; how long that took is printed, not bounded — the REST write
// returns before the dataplane applies it, and a busy machine stretches
// the gap).
func TestNetnsDrainUnderLoad(t *testing.T) {
	dur := loadDuration(t)
	const workers, pace = 8, 10 * time.Millisecond
	e := newEnv(t, "fll", 4)
	// The client opens many short connections to one VIP:port: let it
	// reuse its own TIME_WAIT ports (in its namespace only).
	if err := e.lab.Client.Sysctl("net.ipv4.tcp_tw_reuse", "1"); err != nil {
		t.Fatal(err)
	}
	web := e.webService()
	web.Scheduler = "" // wrr: weights count
	all := slices.Clone(web.Backends)
	web.Backends = web.Backends[:3] // backend-4 joins later
	// web is created through REST, not the config file: the test changes it
	// through REST, and a config-file service is the file's (409, issue 14).
	e.start(e.config(cfgOpts{}))
	e.waitReady(time.Minute)
	e.putService(web)
	e.converged("start", []svcDef{web})
	path := watchPath(t, e.lab.Client, e.lab.Gateway)

	weights := map[int]uint32{0: 1, 1: 1, 2: 1} // backend index → weight; absent = not in the service
	steps := []struct {
		what string
		be   int
		w    int // -1: remove
	}{
		{"drain", 0, 0}, {"remove", 0, -1}, {"add", 0, 1}, {"add", 3, 2},
		{"drain", 1, 0}, {"remove", 1, -1}, {"add", 1, 1},
		{"drain", 3, 0}, {"remove", 3, -1}, {"drain", 2, 0}, {"undrain", 2, 1},
	}
	every := dur / time.Duration(len(steps)+1)
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(web.VIP, web.Port))
	ctx, stop := context.WithCancel(context.Background())
	cpu0 := procCPU(e.d.PID())
	t0 := time.Now()
	res, wait := e.runLoad(ctx, url, workers, pace)
	// excluded[name] = windows in which that backend must get no new connection.
	type window struct {
		from, to time.Time
		kind     string // "drained" (weight 0) or "removed"
	}
	excluded := map[string][]window{}
	open := map[string]window{}
	var changes, kernelOff []string
	var slowest time.Duration // PUT sent → the kernel read back holding it
	for i, s := range steps {
		time.Sleep(time.Until(t0.Add(time.Duration(i+1) * every)))
		e.alive()
		if s.w < 0 {
			delete(weights, s.be)
		} else {
			weights[s.be] = uint32(s.w)
		}
		spec := web
		spec.Backends = nil
		for k := 0; k < len(all); k++ {
			if w, ok := weights[k]; ok {
				spec.Backends = append(spec.Backends, beDef{all[k].Addr, w})
			}
		}
		name := e.lab.Backends[s.be].Name
		ts := time.Now()
		e.putService(spec)
		took := time.Since(ts)
		// The window opens when the kernel was read back holding the spec:
		// a connection started after that read meets the new buckets.
		var probs []string
		inKernel, ok := waitFor(time.Minute, 20*time.Millisecond, func() bool {
			k, err := readKernel(e.lab.Gateway, "ip")
			if err != nil {
				probs = []string{err.Error()}
				return false
			}
			probs = k.diff([]svcDef{spec}, []netip.Addr{demo.GatewayFront.Addr()})
			return len(probs) == 0
		})
		seen := time.Now()
		if !ok {
			kernelOff = append(kernelOff, fmt.Sprintf("%s %s: not in the kernel %s after the PUT: %s", s.what, name, inKernel.Round(time.Millisecond), summary(probs)))
		}
		slowest = max(slowest, took+inKernel)
		// A backend is out from its drain (or removal) until it is added
		// back; a removal right after a drain starts a new window.
		if w, was := open[name]; was {
			w.to = ts
			excluded[name] = append(excluded[name], w)
			delete(open, name)
		}
		switch {
		case s.w == 0:
			open[name] = window{from: seen, kind: "drained"}
		case s.w < 0:
			open[name] = window{from: seen, kind: "removed"}
		}
		changes = append(changes, fmt.Sprintf("%s %s %s (PUT %s, in the kernel %s later)", time.Since(t0).Round(time.Second), s.what, name, took.Round(time.Millisecond), inKernel.Round(time.Millisecond)))
	}
	time.Sleep(time.Until(t0.Add(dur)))
	stop()
	wait()
	elapsed := time.Since(t0)
	cpu := procCPU(e.d.PID()) - cpu0
	for name, w := range open {
		w.to = time.Now()
		excluded[name] = append(excluded[name], w)
	}

	res.mu.Lock()
	defer res.mu.Unlock()
	var leaks []string
	leaked := map[string]int{}
	for _, h := range res.hits {
		for _, w := range excluded[h.backend] {
			if h.start.After(w.from) && h.start.Before(w.to) {
				leaks = append(leaks, fmt.Sprintf("%s (%s) at +%s", h.backend, w.kind, h.start.Sub(t0).Round(time.Millisecond)))
				leaked[w.kind]++
			}
		}
	}
	names := make([]string, 0, len(res.counts))
	for n := range res.counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var per []string
	for _, n := range names {
		per = append(per, fmt.Sprintf("%s=%d", n, res.counts[n]))
	}
	rate := float64(len(res.errs)) / float64(max(res.total, 1))
	t.Logf("changes: %s", strings.Join(changes, "; "))
	t.Logf("MEASURED drain under load: %d workers for %s, %d requests (%.0f/s), %d failed (error rate %.4f%%), new connections to a drained backend %d, to a removed one %d (once the kernel held the change: at most %s after the PUT); %s; daemon CPU %s; load %s",
		workers, elapsed.Round(time.Second), res.total, float64(res.total)/elapsed.Seconds(), len(res.errs), 100*rate, leaked["drained"], leaked["removed"], slowest.Round(time.Millisecond), strings.Join(per, " "), cpu, netns.Loadavg())
	if len(res.errs) > 0 {
		t.Errorf("%d requests failed, e.g. %s", len(res.errs), strings.Join(res.errs[:min(5, len(res.errs))], "; "))
		t.Logf("ICMP unreachable to the client and neighbours INCOMPLETE/FAILED (client, gateway) during the load:\n%s", strings.Join(path.Events(), "\n"))
	}
	if len(kernelOff) > 0 {
		t.Errorf("the kernel did not follow the REST changes: %s", strings.Join(kernelOff, " | "))
	}
	if len(leaks) > 0 {
		t.Errorf("%d new connections reached a drained or removed backend, e.g. %s", len(leaks), strings.Join(leaks[:min(5, len(leaks))], ", "))
	}
	for _, b := range e.lab.Backends {
		if res.counts[b.Name] == 0 {
			t.Errorf("%s never answered", b.Name)
		}
	}
}
