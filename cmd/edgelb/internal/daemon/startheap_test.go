package daemon

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// vmFlags returns the VmFlags of the mapping that holds addr, from
// /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		l := sc.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(l + " x")[0], "-"); ok && !strings.HasSuffix(lo, ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && strings.HasPrefix(l, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(l, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return nil
}

// TestStartHeapAdvised: the piece is a heap mapping that asks for huge pages
// (VmFlags hg) until end, and says no to them after (nh: khugepaged leaves
// the steady heap alone). The kernel keeps these flags whatever its THP
// mode, so this holds on any machine; whether a machine takes the piece at
// all is startHeapSize's and startHeapRoom's.
func TestStartHeapAdvised(t *testing.T) {
	h := prepareStartHeap(startHeapMin)
	if h == nil {
		t.Fatal("no piece prepared")
	}
	if h.n != startHeapMin {
		t.Fatalf("piece of %d bytes, want %d", h.n, startHeapMin)
	}
	for _, at := range []uintptr{h.addr, h.addr + h.n - 1} {
		if fl := vmFlags(t, at); !slices.Contains(fl, "hg") {
			t.Fatalf("piece at %#x: VmFlags %v, want hg", at, fl)
		}
	}
	h.end()
	h.end() // once
	for _, at := range []uintptr{h.addr, h.addr + h.n - 1} {
		if fl := vmFlags(t, at); slices.Contains(fl, "hg") || !slices.Contains(fl, "nh") {
			t.Fatalf("after end, piece at %#x: VmFlags %v, want nh and no hg", at, fl)
		}
	}
	if prepareStartHeap(0) != nil {
		t.Fatal("a piece of size 0 was prepared")
	}
	var none *startHeap
	none.end() // nil-safe
}

func TestStartHeapSize(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		config, ram int64
		want        int64
	}{
		{0, 24 * gib, startHeapMin},
		{1 << 20, 24 * gib, startHeapMin},
		{5535246, 24 * gib, 5535246 * startHeapPerConfigByte}, // 10,000 services × 10 backends
		{1 << 30, 64 * gib, startHeapMax},
		{5535246, 1 * gib, gib / 8}, // capped at an eighth of RAM
		{5535246, 256 << 20, 0},     // a box this small takes none
	} {
		if got := startHeapSize(c.config, c.ram); got != c.want {
			t.Errorf("startHeapSize(%d, %d) = %d, want %d", c.config, c.ram, got, c.want)
		}
	}
}
