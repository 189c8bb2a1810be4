package statesync

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// realProcCtl signals through os.Process and reads /proc/PID/stat and
// /proc/PID/schedstat through files opened when the process is registered
// (track: before it can be reaped, so never a recycled pid's) and read with
// one pread each (the gate reads them every millisecond while draining).
// The gate serializes its calls.
type realProcCtl struct {
	files map[*os.Process]*procFiles
}

type procFiles struct{ stat, schedstat *os.File }

func newRealProcCtl() *realProcCtl { return &realProcCtl{files: map[*os.Process]*procFiles{}} }

func (*realProcCtl) stop(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
func (*realProcCtl) cont(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

func (r *realProcCtl) track(p *os.Process) {
	dir := "/proc/" + strconv.Itoa(p.Pid) + "/"
	f := &procFiles{}
	f.stat, _ = os.Open(dir + "stat")
	f.schedstat, _ = os.Open(dir + "schedstat")
	r.files[p] = f
}

func (r *realProcCtl) forget(p *os.Process) {
	if f := r.files[p]; f != nil {
		for _, x := range []*os.File{f.stat, f.schedstat} {
			if x != nil {
				x.Close()
			}
		}
		delete(r.files, p)
	}
}

// pread reads a /proc file from its start in one call (seq_file
// regenerates it; os.File.ReadAt would call again to fill the buffer).
func pread(f *os.File, buf []byte) []byte {
	if f == nil {
		return nil
	}
	n, err := syscall.Pread(int(f.Fd()), buf, 0)
	if err != nil || n <= 0 {
		return nil
	}
	return buf[:n]
}

func (r *realProcCtl) busy(p *os.Process) bool {
	f := r.files[p]
	if f == nil {
		return false
	}
	var buf [512]byte
	return procStateRunning(pread(f.stat, buf[:]))
}

func (r *realProcCtl) rounds(p *os.Process) uint64 {
	f := r.files[p]
	if f == nil {
		return 0
	}
	var buf [128]byte
	return schedstatRounds(pread(f.schedstat, buf[:]))
}

// procStateRunning reads the state field of /proc/PID/stat: the first
// character after the last ')' (the command name may contain one). Only R
// (running or runnable) is busy; S, D, T and the rest are not.
func procStateRunning(stat []byte) bool { return procState(stat) == 'R' }

// procState is the state letter of a /proc/PID/stat line, 0 when there is none.
func procState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// schedstatRounds is the third field of /proc/PID/schedstat ("run ns, wait
// ns, timeslices"); 0 when unreadable.
func schedstatRounds(b []byte) uint64 {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.ParseUint(string(f[2]), 10, 64)
	return n
}
