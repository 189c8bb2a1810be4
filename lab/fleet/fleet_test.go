//go:build fleet

package fleet

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

func envInt(t *testing.T, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	return def
}

// waitKernel polls ns's vip map every millisecond until vip is in it (or
// gone, with present false); it returns when that happened.
func waitKernel(ns *netns.NS, vip netip.Addr, present bool, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		vips, err := kernelVIPs(ns)
		now := time.Now()
		if err == nil && vips[vip] == present {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("%s: %s present=%v not reached in %s (%v)", ns.Name, vip, present, limit, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// TestFleetShared: three gateways on a 3-member etcd 3.6 cluster.
//
// Propagation: a service created through gateway A's REST API is timed
// from A's answer until it is in B's and C's nftables vip maps (both), and
// GET on B and C then show it with the address A answered;
// EDGELB_FLEET_SAMPLES samples (1,000), paced under the API's 20 req/s.
//
// Churn: 3 gateways × 20 clients create and delete services at random for
// EDGELB_FLEET_CHURN_S seconds (60): no address is ever held by two
// services in any gateway's view (sampled every second on each) or at the
// end; every acknowledged create is there with the address its answer
// gave and every acknowledged delete is gone; each gateway's kernel holds
// exactly the store's addresses once converged.
func TestFleetShared(t *testing.T) {
	samples := envInt(t, "EDGELB_FLEET_SAMPLES", 1000)
	churn := time.Duration(envInt(t, "EDGELB_FLEET_CHURN_S", 60)) * time.Second
	l := newLab(t)
	for i := range 3 {
		l.startGateway(i)
	}
	for i := range 3 {
		l.waitReady(i, 60*time.Second)
	}

	// --- propagation ---
	a, b, c := l.client(0, 1), l.client(1, 1), l.client(2, 1)
	var lat []time.Duration
	for i := range samples {
		t0 := time.Now()
		name := fmt.Sprintf("prop-%d", i)
		_, vip, err := a.put(name)
		if err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		var tb, tc time.Time
		var eb, ec error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); tb, eb = waitKernel(l.gws[1], vip, true, 10*time.Second) }()
		go func() { defer wg.Done(); tc, ec = waitKernel(l.gws[2], vip, true, 10*time.Second) }()
		wg.Wait()
		if eb != nil || ec != nil {
			t.Fatalf("sample %d: %v %v", i, eb, ec)
		}
		lat = append(lat, max(tb.Sub(acked), tc.Sub(acked)))
		for _, cl := range []*client{b, c} {
			code, body, _, err := cl.do(http.MethodGet, "/api/v1/services/"+name, "")
			if err != nil || code != http.StatusOK || !containsAddr(body, vip) {
				t.Fatalf("sample %d: GET %s on gateway %d: %d %s %v (want %s)", i, name, cl.gw, code, body, err, vip)
			}
		}
		if code, body, _, err := a.do(http.MethodDelete, "/api/v1/services/"+name, ""); err != nil || code/100 != 2 {
			t.Fatalf("DELETE %s: %d %s %v", name, code, body, err)
		}
		// A sends 2 requests a sample: stay under its 20/s.
		time.Sleep(time.Until(t0.Add(110 * time.Millisecond)))
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	t.Logf("propagation A→B,C kernels over %d samples: p50 %s ms, p99 %s ms, max %s ms", len(lat), ms(p50), ms(p99), ms(slices.Max(lat)))

	// --- churn ---
	dup, lost, st := runChurn(t, l, churn)
	fv := l.waitFleet(1, 3)
	t.Logf("GET /api/v1/fleet on %s: %d gateways, all at revision %d", fv.Gateway, len(fv.Gateways), fv.Revision)
	fmt.Printf("MEASURED fleet dup=%d lost=%d propagate_p50_ms=%s propagate_p99_ms=%s samples=%d churn_s=%.0f churn_ops=%d acked=%d refused=%d unknown=%d (load %s)\n",
		dup, lost, ms(p50), ms(p99), len(lat), churn.Seconds(), st.ops, st.acked, st.refused, st.unknown, netns.Loadavg())
	if dup != 0 || lost != 0 {
		t.Fatalf("dup=%d lost=%d", dup, lost)
	}
	// The goal (100 ms) is the MEASURED figure; the bound catches a change
	// that stopped propagating by watch (a poll or the resync would take
	// seconds) and holds on a machine whose cores are all busy.
	if p99 > 5*time.Second {
		t.Errorf("propagation p99 %s ms: want under 5 s (goal 100 ms)", ms(p99))
	}
}

func containsAddr(body []byte, a netip.Addr) bool {
	return strings.Contains(string(body), `"`+a.String()+`"`)
}

type churnStats struct {
	ops, acked, refused, unknown int
	lat                          []time.Duration // every write's, answered or not
	at                           []time.Time     // when each was sent
}

// outcome is what the clients know about one name: its last acknowledged
// state, unless a later request got no clear answer.
type outcome struct {
	present bool
	vip     netip.Addr
	unknown bool
}

func runChurn(t *testing.T, l *lab, dur time.Duration) (int, int, churnStats) {
	return runWriters(t, l, writers{dur: dur, perGateway: 20, pace: 400 * time.Millisecond, prefix: "c"})
}

// writers: perGateway clients on each gateway, each sending a write (a
// create or a delete of one of its own, at random) every pace for dur;
// names start with prefix.
type writers struct {
	dur        time.Duration
	perGateway int
	pace       time.Duration
	prefix     string
}

// runWriters runs the writers, then checks: no address twice in any view
// (sampled each second) or at the end, every acknowledged write kept,
// kernels equal to the store. It returns the duplicates, the lost writes
// and the counts.
func runWriters(t *testing.T, l *lab, wr writers) (int, int, churnStats) {
	perGateway, pace, dur := wr.perGateway, wr.pace, wr.dur
	var mu sync.Mutex
	known := map[string]*outcome{}
	var st churnStats
	dupSeen := 0
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := range 3 {
		for id := range perGateway {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := l.client(g, 10+id)
				r := rand.New(rand.NewPCG(uint64(g), uint64(id)))
				var live []string
				seq := 0
				for time.Now().Before(stop) {
					t0 := time.Now()
					if len(live) == 0 || r.IntN(2) == 0 {
						name := fmt.Sprintf("%s%d-%d-%d", wr.prefix, g, id, seq)
						seq++
						code, vip, err := cl.put(name)
						mu.Lock()
						st.ops++
						st.lat, st.at = append(st.lat, time.Since(t0)), append(st.at, t0)
						switch {
						case err == nil:
							st.acked++
							known[name] = &outcome{present: true, vip: vip}
							live = append(live, name)
						case code == http.StatusServiceUnavailable:
							st.refused++ // 503: refused, but count it uncertain anyway
							known[name] = &outcome{unknown: true}
							if st.refused <= 3 {
								t.Logf("refused: %v", err)
							}
						default:
							st.unknown++
							known[name] = &outcome{unknown: true}
						}
						mu.Unlock()
					} else {
						k := r.IntN(len(live))
						name := live[k]
						code, _, _, err := cl.do(http.MethodDelete, "/api/v1/services/"+name, "")
						mu.Lock()
						st.ops++
						st.lat, st.at = append(st.lat, time.Since(t0)), append(st.at, t0)
						switch {
						case err == nil && code/100 == 2:
							st.acked++
							known[name] = &outcome{}
							live = slices.Delete(live, k, k+1)
						case code == http.StatusServiceUnavailable:
							st.refused++
							known[name].unknown = true
						default:
							st.unknown++
							known[name].unknown = true
							t.Logf("DELETE %s on gateway %d: %d %v", name, g, code, err)
						}
						mu.Unlock()
					}
					time.Sleep(time.Until(t0.Add(pace)))
				}
			}()
		}
	}
	// Each gateway's view, every second: no address held twice. A view
	// that does not come in time (the client's 10 s) shows nothing either
	// way: it is counted, not failed — reads queue behind the gateway's
	// writes, and on a machine loaded far beyond its cores (a soak run with
	// benchmarks beside it: load 9.9 on 2 cores) one gateway's reads waited
	// over 10 s while it lost write races. A gateway that never answers
	// fails the test (and the convergence check below needs every view).
	sampler := make(chan struct{})
	var answered, missed [3]int
	go func() {
		defer close(sampler)
		cls := []*client{l.client(0, 5), l.client(1, 5), l.client(2, 5)}
		for time.Now().Before(stop) {
			for _, cl := range cls {
				view, _, err := cl.list()
				if err != nil {
					missed[cl.gw]++
					t.Logf("gateway %d: no view this second: %v", cl.gw, err)
					continue
				}
				answered[cl.gw]++
				if d := dups(view); d > 0 {
					mu.Lock()
					dupSeen += d
					mu.Unlock()
					t.Errorf("gateway %d shows %d address(es) held by two services", cl.gw, d)
				}
			}
			time.Sleep(time.Second)
		}
	}()
	wg.Wait()
	<-sampler
	for g := range 3 {
		if missed[g] > 0 {
			t.Logf("gateway %d: %d views, %d not in time", g, answered[g], missed[g])
		}
		if answered[g] == 0 {
			t.Errorf("gateway %d never showed its view during the churn (%d tries)", g, missed[g])
		}
	}

	// Converged: every gateway at the same revision with the same view.
	final := l.converged(t)
	dup := dupSeen + dups(final)
	lost := 0
	for name, o := range known {
		if o.unknown {
			continue
		}
		got, ok := final[name]
		switch {
		case o.present && (!ok || !slices.Equal(got, []netip.Addr{o.vip})):
			lost++
			t.Errorf("acknowledged create of %s (%s) lost: now %v (present %v)", name, o.vip, got, ok)
		case !o.present && ok:
			lost++
			t.Errorf("acknowledged delete of %s lost: still there with %v", name, got)
		}
	}
	want := map[netip.Addr]bool{}
	for _, ips := range final {
		for _, ip := range ips {
			want[ip] = true
		}
	}
	for i, ns := range l.gws {
		var got map[netip.Addr]bool
		ok := false
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			var err error
			if got, err = kernelVIPs(ns); err == nil && mapsEqual(got, want) {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("gateway %d kernel: %d VIPs, the store %d", i, len(got), len(want))
		}
	}
	t.Logf("churn: %d operations, %d acknowledged, %d refused (503), %d without a clear answer; %d services at the end", st.ops, st.acked, st.refused, st.unknown, len(final))
	return dup, lost, st
}

func dups(view map[string][]netip.Addr) int {
	holder := map[netip.Addr]string{}
	n := 0
	for name, ips := range view {
		for _, ip := range ips {
			if _, ok := holder[ip]; ok {
				n++
			}
			holder[ip] = name
		}
	}
	return n
}

func equalViews(a, b map[string][]netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[netip.Addr]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
