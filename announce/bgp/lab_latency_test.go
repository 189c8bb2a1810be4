//go:build bgp

package bgp

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
)

// latencyLab is one gateway peering with FRR over IPv4, session up, nothing
// announced yet.
func latencyLab(t testing.TB) (*frr, *speakerProc) {
	t.Helper()
	l := newLab(t, 1)
	f := startFRR(t, l.router, frrConfig(1, ""))
	sp := startSpeaker(t, l.gws[0], speakerConfig(0, "", false))
	sp.set()
	sp.waitPeer("router4", StateEstablished, 20*time.Second)
	return f, sp
}

func benchVIP(i int) announce.VIP {
	return announce.VIP{Addr: netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%250)}), Pool: "bench",
		Communities: []string{"65000:100"}, LocalPref: 200}
}

// waitFRR polls bgpd over its vty socket (well under a millisecond per
// poll). want=true: first = the path is in the RIB at all (the UPDATE was
// parsed), done = it is the best path. want=false: first = no longer best,
// done = no path left at all. FRR runs best-path selection from a work
// queue that holds new work 50 ms, which is the gap between the two.
func waitFRR(t testing.TB, f *frr, prefix string, want bool) (first, done time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		paths, err := f.prefix(prefix)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if first.IsZero() && ((want && len(paths) > 0) || (!want && !present(paths))) {
			first = now
		}
		if (want && present(paths)) || (!want && len(paths) == 0) {
			return first, now
		}
		if now.After(deadline) {
			t.Fatalf("FRR: %s never became present=%v: %+v", prefix, want, paths)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// percentile is the nearest-rank percentile.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p/100*float64(len(s)) + 0.999999)
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TestBGPFRRAnnounceLatency: VIP added (a SetVIPs with one more VIP than
// before, sent from the test process) → route best in FRR's RIB, for 100
// VIPs one after another; then each removed → gone. Prints p50/p99.
func TestBGPFRRAnnounceLatency(t *testing.T) {
	const n = 100
	f, sp := latencyLab(t)
	var vips []announce.VIP
	var add, recv, del, unbest, inChild []time.Duration
	for i := range n {
		v := benchVIP(i)
		vips = append(vips, v)
		start := time.Now()
		rep := sp.set(vips...)
		r, best := waitFRR(t, f, v.Addr.String()+"/32", true)
		add, recv = append(add, best.Sub(start)), append(recv, r.Sub(start))
		inChild = append(inChild, time.Duration(rep.Done-rep.Start))
	}
	for len(vips) > 0 {
		v := vips[0]
		vips = vips[1:]
		start := time.Now()
		sp.set(vips...)
		notBest, gone := waitFRR(t, f, v.Addr.String()+"/32", false)
		del, unbest = append(del, gone.Sub(start)), append(unbest, notBest.Sub(start))
	}
	t.Logf("VIP added → route best in FRR's RIB (%d VIPs): p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		n, ms(percentile(add, 50)), ms(percentile(add, 99)), ms(percentile(add, 100)))
	t.Logf("VIP added → path received by FRR (before its best-path run, held ~50 ms by FRR's work queue): p50 %.2f ms, p99 %.2f ms",
		ms(percentile(recv, 50)), ms(percentile(recv, 99)))
	t.Logf("VIP removed → no path left in FRR's RIB: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		ms(percentile(del, 50)), ms(percentile(del, 99)), ms(percentile(del, 100)))
	t.Logf("VIP removed → no longer best in FRR:     p50 %.2f ms, p99 %.2f ms",
		ms(percentile(unbest, 50)), ms(percentile(unbest, 99)))
	t.Logf("of which SetVIPs in the speaker (diff + GoBGP AddPath): p50 %.3f ms, p99 %.3f ms",
		ms(percentile(inChild, 50)), ms(percentile(inChild, 99)))
}

// BenchmarkBGPFRRAnnounce: per op, one VIP announced until FRR holds it as
// best, then withdrawn until FRR has dropped it.
// go test -tags bgp -run '^$' -bench BenchmarkBGPFRR -benchtime 100x ./announce/bgp/
func BenchmarkBGPFRRAnnounce(b *testing.B) {
	f, sp := latencyLab(b)
	add := make([]time.Duration, 0, b.N)
	del := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := benchVIP(i)
		prefix := v.Addr.String() + "/32"
		start := time.Now()
		sp.set(v)
		_, t1 := waitFRR(b, f, prefix, true)
		add = append(add, t1.Sub(start))
		sp.set()
		_, t2 := waitFRR(b, f, prefix, false)
		del = append(del, t2.Sub(t1))
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(add, 50)), "announce-p50-ms")
	b.ReportMetric(ms(percentile(add, 99)), "announce-p99-ms")
	b.ReportMetric(ms(percentile(del, 50)), "withdraw-p50-ms")
	b.ReportMetric(ms(percentile(del, 99)), "withdraw-p99-ms")
}
