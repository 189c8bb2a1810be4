package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// plainConfig writes n services × 10 backends the way a person or a
// generator would, one service per few lines, no YAML anchors.
func plainConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("pools:\n  - name: bulk\n    addresses: [\"2001:db8:1::/108\"]\nservices:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - name: svc-%d\n    pool: bulk\n    families: [IPv6]\n    ports: [{name: http, port: %d, targetPort: 8080}]\n    backends: [", i, 1000+i%50)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{address: \"[2001:db8:2::%x]:%d\"}", 1+(i+j)%60000, 8000+j)
		}
		b.WriteString("]\n")
	}
	return []byte(b.String())
}

// TestParseFiftyThousandPlain: 50,000 services × 10 backends written out
// plainly fit MaxSize and load (issue 18: 10,000 of them, 5.2 MB, used to be
// refused by a 4 MiB limit).
func TestParseFiftyThousandPlain(t *testing.T) {
	data := plainConfig(50000)
	if len(data) > MaxSize {
		t.Fatalf("%d bytes exceed MaxSize %d", len(data), MaxSize)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("50,000 services × 10 backends: %.1f MB plain, loaded in %v", float64(len(data))/1e6, time.Since(start).Round(time.Millisecond))
	if len(cfg.Services) != 50000 {
		t.Fatalf("%d services, want 50000", len(cfg.Services))
	}
	// A file past the limit is refused with the limit in the message.
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, append(data, make([]byte, MaxSize-len(data)+1)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Fatalf("a file past MaxSize: %v", err)
	}
}

// BenchmarkParse10000: a plainly written config of 10,000 services × 10
// backends, parsed and validated (the daemon's "config" start-up phase
// without reading the file).
func BenchmarkParse10000(b *testing.B) {
	data := plainConfig(10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseAllocationBudget bounds what parsing a plainly written config
// costs per service (2,000 × 10 backends: ~25 KB and ~375 allocations per
// service with sigs.k8s.io/yaml's YAML → JSON → strict decoder, 2026-11;
// every byte is heap a fresh daemon must fault in). Allocation counts and
// bytes follow from the input, not from chance; the margin (~1.6×) covers
// other Go versions. The hand-written fast path it guarded before (~4.5 KB,
// ~81 allocations) was deleted for simplicity (issue 34).
func TestParseAllocationBudget(t *testing.T) {
	data := plainConfig(2000)
	const perSvcBytes, perSvcAllocs = 40 << 10, 600
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := Parse(data); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	bytes, allocs := (after.TotalAlloc-before.TotalAlloc)/2000, (after.Mallocs-before.Mallocs)/2000
	t.Logf("2,000 services × 10 backends, %d bytes of YAML: %d bytes and %d allocations per service", len(data), bytes, allocs)
	if bytes > perSvcBytes || allocs > perSvcAllocs {
		t.Fatalf("%d bytes and %d allocations per service, budget %d and %d", bytes, allocs, perSvcBytes, perSvcAllocs)
	}
}
