package daemon

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestStartHeapAdvised: where the kernel's THP mode is "madvise" (and
// overcommit not strict, RAM at least 8 × the smallest piece), the piece
// is a heap mapping that asks for huge pages (VmFlags hg) until end, and
// says no to them after (nh: khugepaged leaves the steady heap alone);
// otherwise nothing is asked.
func TestStartHeapAdvised(t *testing.T) {
	h := prepareStartHeap(1 << 20)
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if thpMode() != "madvise" || strictOvercommit() || int64(si.Totalram)*int64(si.Unit)/8 < startHeapMin {
		if h != nil {
			t.Fatalf("THP mode %q, strict overcommit %v, RAM %d: a piece was prepared", thpMode(), strictOvercommit(), int64(si.Totalram)*int64(si.Unit))
		}
		h.end() // nil-safe
		return
	}
	if h == nil {
		t.Fatal("THP mode madvise: no piece prepared")
	}
	if h.n != startHeapMin {
		t.Fatalf("piece of %d bytes for a 1 MiB config, want the minimum %d", h.n, startHeapMin)
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
}

func TestStartHeapSize(t *testing.T) {
	for _, c := range []struct {
		config int64
		want   int64
	}{
		{0, startHeapMin},
		{1 << 20, startHeapMin},
		{5535246, 5535246 * startHeapPerConfigByte}, // 10,000 services × 10 backends
		{1 << 30, startHeapMax},
	} {
		if got := startHeapSize(c.config); got != c.want {
			t.Errorf("startHeapSize(%d) = %d, want %d", c.config, got, c.want)
		}
	}
}
