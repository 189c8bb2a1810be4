//go:build netns

package nft

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// genConfig makes n services × perSvc backends: VIPs 203.0.113.1-250 with
// ports from 1000 (unique VIP:port), a node port for every tenth, backends
// 198.51.100.x:8000+.
func genConfig(n, perSvc int) proxy.Config {
	cfg := proxy.Config{NodeAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	for i := 0; i < n; i++ {
		s := proxy.Service{
			Name:     fmt.Sprintf("bench/svc-%d", i),
			VIP:      netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i%250)}),
			Port:     uint16(1000 + i/250),
			Protocol: proxy.TCP,
			Method:   proxy.NAT,
		}
		if i%10 == 0 {
			s.NodePort = uint16(30000 + i/10)
		}
		for j := 0; j < perSvc; j++ {
			s.Backends = append(s.Backends, proxy.Backend{
				Addr:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + (i+j)%250)}), uint16(8000+j)),
				Weight: 1,
			})
		}
		cfg.Services = append(cfg.Services, s)
	}
	return cfg
}

func benchDataplane(b *testing.B, ns *netns.NS) *Dataplane {
	b.Helper()
	d, err := New(Options{NetNS: int(ns.Handle())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Cleanup(context.Background()); d.Close() })
	return d
}

// benchCold measures a cold sync: an empty namespace, a fresh dataplane, one
// Apply of n services × 10 backends.
func benchCold(b *testing.B, n int) {
	ns := netns.NewT(b, "nfb")
	cfg := genConfig(n, 10)
	ctx := context.Background()
	var total, cpu time.Duration
	var st Stats
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := benchDataplane(b, ns)
		if err := d.Cleanup(ctx); err != nil {
			b.Fatal(err)
		}
		d.stats = Stats{}
		b.StartTimer()
		start, c0 := time.Now(), cpuTime()
		if err := d.Apply(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		cpu += cpuTime() - c0
		b.StopTimer()
		st = d.Stats()
		d.Close()
	}
	ms := float64(total.Microseconds()) / 1000 / float64(b.N)
	cpums := float64(cpu.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(ms, "ms/sync")
	b.ReportMetric(cpums, "cpu-ms/sync")
	b.ReportMetric(float64(st.Elements), "elements")
	b.ReportMetric(float64(st.Batches), "batches")
	fmt.Printf("nft cold sync %d services × 10 backends: %.1f ms wall, %.1f ms CPU (user+sys) (%d elements in %d batches, %d messages; load %s)\n",
		n, ms, cpums, st.Elements, st.Batches, st.Messages, netns.Loadavg())
}

func BenchmarkNetnsColdSync1000(b *testing.B)  { benchCold(b, 1000) }
func BenchmarkNetnsColdSync10000(b *testing.B) { benchCold(b, 10000) }

// BenchmarkNetnsUpdateOneOf10000 measures Apply of the whole 10,000-service
// Config where one service changed a backend: the diff, one netlink batch.
func BenchmarkNetnsUpdateOneOf10000(b *testing.B) {
	ns := netns.NewT(b, "nfb")
	cfg := genConfig(10000, 10)
	ctx := context.Background()
	d := benchDataplane(b, ns)
	if err := d.Apply(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	before := d.Stats()
	victim := &cfg.Services[4321]
	alt := [2]netip.AddrPort{victim.Backends[0].Addr, netip.MustParseAddrPort("198.51.100.251:9999")}
	b.ResetTimer()
	start, c0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		victim.Backends[0].Addr = alt[(i+1)%2]
		if err := d.Apply(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	el, cpu := time.Since(start), cpuTime()-c0
	b.StopTimer()
	after := d.Stats()
	ms := float64(el.Microseconds()) / 1000 / float64(b.N)
	cpums := float64(cpu.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(ms, "ms/update")
	b.ReportMetric(cpums, "cpu-ms/update")
	b.ReportMetric(float64(after.Batches-before.Batches)/float64(b.N), "batches/update")
	b.ReportMetric(float64(after.Elements-before.Elements)/float64(b.N), "elements/update")
	fmt.Printf("nft update 1 of 10000 services: %.3f ms wall, %.3f ms CPU (%.1f batches, %.1f elements per update; load %s)\n",
		ms, cpums, float64(after.Batches-before.Batches)/float64(b.N), float64(after.Elements-before.Elements)/float64(b.N), netns.Loadavg())
}

// cpuTime is the process's user+system CPU time: on a machine shared by
// many builds, wall time measures the queue for a core as much as the work.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchResync measures Resync of 10,000 services × 10 backends with nothing
// changed: full reads back every element; otherwise the generation gate
// answers (issue 18: an idle gateway must cost almost nothing).
func benchResync(b *testing.B, full bool) {
	ns := netns.NewT(b, "nfb")
	cfg := genConfig(10000, 10)
	ctx := context.Background()
	d := benchDataplane(b, ns)
	if err := d.Apply(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	before := d.Stats()
	b.ResetTimer()
	start, c0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		if full {
			d.clean.Forget()
		}
		if err := d.Resync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	el, cpu := time.Since(start), cpuTime()-c0
	b.StopTimer()
	after := d.Stats()
	ms := float64(el.Microseconds()) / 1000 / float64(b.N)
	cpums := float64(cpu.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(ms, "ms/resync")
	b.ReportMetric(cpums, "cpu-ms/resync")
	b.ReportMetric(float64(after.Reads-before.Reads)/float64(b.N), "reads/resync")
	fmt.Printf("nft resync (full=%v) of 10000 services, nothing changed: %.3f ms wall, %.3f ms CPU (%.1f table reads per resync; load %s)\n",
		full, ms, cpums, float64(after.Reads-before.Reads)/float64(b.N), netns.Loadavg())
}

func BenchmarkNetnsResyncIdle10000(b *testing.B) { benchResync(b, false) }
func BenchmarkNetnsResyncFull10000(b *testing.B) { benchResync(b, true) }
