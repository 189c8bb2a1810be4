package engine

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

func benchServices(n int) []lb.ServiceSpec {
	out := make([]lb.ServiceSpec, n)
	for i := range out {
		out[i] = svc(fmt.Sprint("s", i), 80, "198.51.100.2", "198.51.100.3")
	}
	return out
}

// BenchmarkSyncConfig: a cold config load of N services (one transaction,
// one store commit) — how standalone edgelb starts.
func BenchmarkSyncConfig(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n, "-services"), func(b *testing.B) {
			pools := []lb.Pool{mustPool(b, "p", true, "198.18.0.0/16")}
			svcs := benchServices(n)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				e := start(b, store.NewMem(), Options{})
				t0 := time.Now()
				if err := e.SyncConfig(ctx, pools, svcs); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms/load")
			}
		})
	}
}

// BenchmarkPutService: replacing one service (new backends) among N. Each
// change clones the allocator and recomputes the whole desired state, so
// its cost grows linearly with N; this shows by how much.
func BenchmarkPutService(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n, "-services"), func(b *testing.B) {
			e := start(b, store.NewMem(), Options{})
			// N-1 from the config file, and s0 over REST: the REST API
			// replaces only services it created (config-file ones are 409).
			svcs := benchServices(n)
			if err := e.SyncConfig(ctx, []lb.Pool{mustPool(b, "p", true, "198.18.0.0/16")}, svcs[1:]); err != nil {
				b.Fatal(err)
			}
			if _, _, err := e.PutService(ctx, svcs[0]); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := svc(svcs[0].Name, 80, fmt.Sprintf("198.51.100.%d", 2+i%200))
				if _, _, err := e.PutService(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyncConfigBolt: the same cold load on the bbolt state file, as
// standalone edgelb starts, at 10,000 and 50,000 services. Puts in random key
// order made one bbolt transaction quadratic (50,000: 2.6 s; sorted: 0.9 s).
func BenchmarkSyncConfigBolt(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			pools := []lb.Pool{mustPool(b, "p", true, "198.16.0.0/14")}
			svcs := benchServices(n)
			for i := 0; i < b.N; i++ {
				st, err := store.OpenBolt(filepath.Join(b.TempDir(), "s.db"), store.BoltOptions{})
				if err != nil {
					b.Fatal(err)
				}
				e := start(b, st, Options{})
				t0 := time.Now()
				if err := e.SyncConfig(ctx, pools, svcs); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms/load")
			}
		})
	}
}
