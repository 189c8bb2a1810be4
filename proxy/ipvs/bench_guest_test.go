//go:build ipvsguest

package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// Sync benchmarks in the guest, the same work for every dataplane:
// cold = Apply of 1,000 services × 10 backends into an empty namespace;
// update1 = Apply of the same config with one backend's weight changed;
// noop = Apply of an unchanged config; resync = Resync of it.
// Each reports ms/op; lab/guest/run-suite.sh prints them as a table.

const (
	benchServices = 1000
	benchBackends = 10
)

// benchConfig spreads services over 250 VIPs × 4 ports in 203.0.113.0/24,
// backends over 198.51.100.0/24.
func benchConfig(weight uint32) proxy.Config {
	cfg := proxy.Config{NodeAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	for i := 0; i < benchServices; i++ {
		s := proxy.Service{Name: fmt.Sprintf("bench/%d", i), VIP: netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i/4)}),
			Port: uint16(80 + i%4), Protocol: proxy.TCP, Scheduler: proxy.WeightedRoundRobin}
		for j := 0; j < benchBackends; j++ {
			w := uint32(1)
			if i == benchServices/2 && j == 0 {
				w = weight
			}
			s.Backends = append(s.Backends, proxy.Backend{
				Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + (i*benchBackends+j)%250)}), uint16(8000+j)), Weight: w})
		}
		cfg.Services = append(cfg.Services, s)
	}
	return cfg
}

// rounds: update1 and noop are averaged over this many Applies per b.N, so
// one slow round on a shared host weighs less.
const rounds = 5

type dpFactory func(tb testing.TB, n *netns.NS) proxy.Dataplane

// benchDataplanes are the dataplanes measured side by side.
var benchDataplanes = []struct {
	name string
	new  dpFactory
}{
	{"ipvs", func(tb testing.TB, n *netns.NS) proxy.Dataplane {
		return newIn(tb, n, Options{Logf: func(string, ...any) {}})
	}},
}

func msPerOp(b *testing.B, d time.Duration) {
	b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), "ms/op")
}

func BenchmarkIPVSGuestSync(b *testing.B) {
	requireIPVS(b)
	ctx := context.Background()
	base, changed := benchConfig(1), benchConfig(7)
	for _, dp := range benchDataplanes {
		b.Run(dp.name+"/cold-1000x10", func(b *testing.B) {
			n := netns.NewT(b, "ivb")
			d := dp.new(b, n)
			defer d.Close()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				if err := d.Cleanup(ctx); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := d.Apply(ctx, base); err != nil {
					b.Fatal(err)
				}
				total += time.Since(t0)
			}
			b.StopTimer()
			msPerOp(b, total)
			d.Cleanup(ctx)
		})
		b.Run(dp.name+"/update1-at-1000", func(b *testing.B) {
			n := netns.NewT(b, "ivb")
			d := dp.new(b, n)
			defer d.Close()
			if err := d.Apply(ctx, base); err != nil {
				b.Fatal(err)
			}
			var total time.Duration
			for i := 0; i < b.N*rounds; i++ {
				cfg := changed
				if i%2 == 1 {
					cfg = base
				}
				t0 := time.Now()
				if err := d.Apply(ctx, cfg); err != nil {
					b.Fatal(err)
				}
				total += time.Since(t0)
			}
			b.StopTimer()
			msPerOp(b, total/rounds)
			d.Cleanup(ctx)
		})
		b.Run(dp.name+"/noop-at-1000", func(b *testing.B) {
			n := netns.NewT(b, "ivb")
			d := dp.new(b, n)
			defer d.Close()
			if err := d.Apply(ctx, base); err != nil {
				b.Fatal(err)
			}
			var total time.Duration
			for i := 0; i < b.N*rounds; i++ {
				t0 := time.Now()
				if err := d.Apply(ctx, base); err != nil {
					b.Fatal(err)
				}
				total += time.Since(t0)
			}
			b.StopTimer()
			msPerOp(b, total/rounds)
			var resync time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := d.Resync(ctx); err != nil {
					b.Fatal(err)
				}
				resync += time.Since(t0)
			}
			b.ReportMetric(float64(resync.Microseconds())/1000/float64(b.N), "resync-ms/op")
			d.Cleanup(ctx)
		})
	}
}

// BenchmarkIPVSGuestCallCost: what one netlink call costs in the guest,
// through moby/ipvs directly and through the guarded handle.
func BenchmarkIPVSGuestCallCost(b *testing.B) {
	requireIPVS(b)
	for _, guardedCalls := range []bool{false, true} {
		name := "raw-moby"
		if guardedCalls {
			name = "guarded"
		}
		b.Run(name+"/add-1000-services", func(b *testing.B) {
			n := netns.NewT(b, "ivc")
			mh, err := newMobyHandle(nsPath(n), 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer mh.Close()
			raw, err := mobyipvs.New(nsPath(n))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				raw.Flush()
				t0 := time.Now()
				for j := 0; j < 1000; j++ {
					vs := virtualServer{Key: vsKey{Addr: netip.AddrFrom4([4]byte{203, 0, 113, byte(j / 4)}), Port: uint16(80 + j%4), Proto: proxy.TCP},
						Sched: "wrr", Netmask: 0xffffffff}
					if guardedCalls {
						err = mh.AddService(vs)
					} else {
						err = raw.NewService(toMobyService(vs))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				total += time.Since(t0)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/op")
			// Reading back: one dump of 1,000 services, then 1,000
			// destination dumps (what a Resync does).
			t0 := time.Now()
			svcs, err := mh.Services()
			if err != nil || len(svcs) != 1000 {
				b.Fatalf("list: %d %v", len(svcs), err)
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "list-ms/op")
			t0 = time.Now()
			for _, s := range svcs {
				if guardedCalls {
					_, err = mh.Dests(s.Key)
				} else {
					_, err = raw.GetDestinations(toMobyService(s))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "dests1000-ms/op")
			raw.Flush()
		})
	}
}
