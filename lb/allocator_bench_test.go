package lb

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used. The machine is shared by
// many builds, so wall-clock ns/op swings with the load; cpu-ns/op
// (reported next to it) is what the allocator itself costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureCPU runs f under the benchmark timer and reports cpu-ns/op.
func measureCPU(b *testing.B, f func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	f()
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

const (
	benchPool  = "198.18.0.0/16" // RFC 2544 benchmarking space: never on a wire here
	benchTaken = 60000
)

func benchAllocator(b *testing.B, scattered bool) (*Allocator, Range) {
	b.Helper()
	r := mustRange(b, benchPool)
	a := NewAllocator()
	if err := a.SetPools([]Pool{{Name: "bench", AutoAssign: true, Ranges: []Range{r}}}); err != nil {
		b.Fatal(err)
	}
	if !scattered {
		for i := 0; i < benchTaken; i++ {
			if _, err := a.Allocate(fmt.Sprint("taken-", i), IPv4, Request{}); err != nil {
				b.Fatal(err)
			}
		}
		return a, r
	}
	// Random addresses: the worst case for runs (about as many runs as free gaps).
	rng := rand.New(rand.NewPCG(1, 2))
	for _, off := range rng.Perm(1 << 16)[:benchTaken] {
		ip := netip.AddrFrom4([4]byte{198, 18, byte(off >> 8), byte(off)})
		if err := a.Assign(fmt.Sprint("taken-", off), ip, Request{}); err != nil {
			b.Fatal(err)
		}
	}
	return a, r
}

// BenchmarkAssignRelease: one auto-assignment and its release on a /16
// with 60,000 addresses taken (goal < 10 µs/op: no full scans).
func BenchmarkAssignRelease(b *testing.B) {
	for _, scattered := range []bool{false, true} {
		layout := "contiguous"
		if scattered {
			layout = "scattered"
		}
		b.Run("allocate/"+layout, func(b *testing.B) {
			a, _ := benchAllocator(b, scattered)
			req := Request{Ports: []PortProto{{Port: 80, Protocol: 6}}}
			measureCPU(b, func() {
				for i := 0; i < b.N; i++ {
					ip, err := a.Allocate("bench", IPv4, req)
					if err != nil {
						b.Fatal(err)
					}
					a.Release("bench", ip)
				}
			})
		})
		b.Run("assign/"+layout, func(b *testing.B) {
			a, r := benchAllocator(b, scattered)
			// The requested addresses: the free ones, in turn.
			var free []netip.Addr
			for ip := r.First; r.Contains(ip); ip = ip.Next() {
				if len(a.Owners(ip)) == 0 {
					free = append(free, ip)
				}
			}
			measureCPU(b, func() {
				for i := 0; i < b.N; i++ {
					ip := free[i%len(free)]
					if err := a.Assign("bench", ip, Request{}); err != nil {
						b.Fatal(err)
					}
					a.Release("bench", ip)
				}
			})
		})
	}
	// The baseline: what a first-fit linear scan over the pool (the way
	// MetalLB walks a CIDR) costs on the same layout, so the gain is visible.
	b.Run("baseline-linear-scan/contiguous", func(b *testing.B) {
		a, r := benchAllocator(b, false)
		used := map[netip.Addr]bool{}
		for ip := r.First; r.Contains(ip); ip = ip.Next() {
			if len(a.Owners(ip)) > 0 {
				used[ip] = true
			}
		}
		scanned := 0
		measureCPU(b, func() {
			for i := 0; i < b.N; i++ {
				var got netip.Addr
				for ip := r.First; r.Contains(ip); ip = ip.Next() {
					scanned++
					if !used[ip] {
						got = ip
						break
					}
				}
				used[got] = true
				delete(used, got)
			}
		})
		b.ReportMetric(float64(scanned)/float64(b.N), "addrs-scanned/op")
	})
}

// BenchmarkAllocateHugeIPv6: allocations keep O(log n) on a /64 with many taken.
func BenchmarkAllocateHugeIPv6(b *testing.B) {
	a := NewAllocator()
	if err := a.SetPools([]Pool{{Name: "v6", AutoAssign: true, Ranges: []Range{mustRange(b, "2001:db8::/64")}}}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < benchTaken; i++ {
		if _, err := a.Allocate(fmt.Sprint("taken-", i), IPv6, Request{}); err != nil {
			b.Fatal(err)
		}
	}
	measureCPU(b, func() {
		for i := 0; i < b.N; i++ {
			ip, err := a.Allocate("bench", IPv6, Request{})
			if err != nil {
				b.Fatal(err)
			}
			a.Release("bench", ip)
		}
	})
}
