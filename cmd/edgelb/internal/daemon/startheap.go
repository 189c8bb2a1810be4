package daemon

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Start-up touches its memory for the first time: parsing the config,
// rendering, encoding and writing tens of thousands of kernel objects
// allocate a heap that grows from nothing to ~100 MiB at 10,000 services
// within a second, and on a virtual machine each first touch of a 4 KiB page
// is a fault costing 14–17 µs (CONTRIBUTING.md): ~24,000 faults, a third of
// start-up's CPU (issue 18). A 2 MiB transparent huge page costs one fault.
// Go does not ask for huge pages for its heap, and where the kernel's THP
// mode is "madvise" (Debian's default) nothing else does.
//
// So for start-up only, the daemon grows the heap in one piece, asks for huge
// pages on that piece, and frees it for the start-up's allocations to reuse
// (the page allocator hands out the lowest free addresses first: that piece).
// Once ready it takes the request back (MADV_NOHUGEPAGE), so khugepaged never
// collapses the steady heap's sparse pages into huge ones (which would raise
// RSS), and the memory release after the first apply returns the free parts
// of those pages as usual. Nothing here is needed for correctness: any step
// that does not apply (another THP mode, strict overcommit) or fails
// leaves the heap as Go made it.

// startHeapPerConfigByte sizes the piece from the config file: at 10,000
// services × 10 backends (5.5 MB of YAML) start-up's heap peaked at
// ~150 MiB. The piece is address space until touched, but it is counted in
// the kernel's commit charge and Go never unmaps it (VmSize and HeapSys keep
// it): so it is capped at an eighth of RAM, and not taken at all under
// strict overcommit (vm.overcommit_memory=2), where a refused allocation
// would be a fatal out-of-memory in Go rather than a skipped step.
const (
	startHeapPerConfigByte = 32
	startHeapMin           = 64 << 20
	startHeapMax           = 4 << 30
	// startHeapLimit ends the request when no first apply did.
	startHeapLimit = 2 * time.Minute
)

// startHeap is the advised piece: its address and length (uintptrs, not a
// slice, so the piece itself can be freed).
type startHeap struct {
	addr, n uintptr
	once    sync.Once
}

// thpMode returns the kernel's transparent huge page mode (always, madvise
// or never), "" when unknown.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	for _, m := range []string{"always", "madvise", "never"} {
		if strings.Contains(string(b), "["+m+"]") {
			return m
		}
	}
	return ""
}

// strictOvercommit reports vm.overcommit_memory=2 (strict accounting).
func strictOvercommit() bool {
	b, err := os.ReadFile("/proc/sys/vm/overcommit_memory")
	return err != nil || strings.TrimSpace(string(b)) == "2"
}

// startHeapRoom is the piece to take for a config of configSize bytes on
// this machine, 0 for none: the kernel's mode makes it pointless — "always"
// gives huge pages anyway (and taking the request back would take them from
// an operator who wants them), "never" gives none — or it would cost too
// much (above).
func startHeapRoom(configSize int64) int64 {
	if thpMode() != "madvise" || strictOvercommit() {
		return 0
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return startHeapSize(configSize, int64(si.Totalram)*int64(si.Unit))
}

// startHeapSize sizes the piece for a config of configSize bytes on a
// machine with ram bytes of memory; 0 where even the smallest piece would be
// more than an eighth of it (a box this small gains less than it costs).
func startHeapSize(configSize, ram int64) int64 {
	size := min(max(configSize*startHeapPerConfigByte, startHeapMin), startHeapMax, ram/8)
	if size < startHeapMin {
		return 0
	}
	return size
}

// prepareStartHeap grows the heap by a piece of size bytes and asks for huge
// pages on it; nil when size is 0 or the request is refused.
func prepareStartHeap(size int64) *startHeap {
	if size <= 0 {
		return nil
	}
	piece := make([]byte, size) // fresh from the OS: Go does not touch it
	if unix.Madvise(piece, unix.MADV_HUGEPAGE) != nil {
		return nil
	}
	h := &startHeap{addr: uintptr(unsafe.Pointer(unsafe.SliceData(piece))), n: uintptr(len(piece))}
	// piece is not used below: this collection frees it now, while the
	// heap is small (a few MiB), so start-up's first allocations land in it.
	runtime.GC()
	return h
}

// end takes the huge page request back (once; nil-safe).
func (h *startHeap) end() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		syscall.Syscall(syscall.SYS_MADVISE, h.addr, h.n, unix.MADV_NOHUGEPAGE)
	})
}
