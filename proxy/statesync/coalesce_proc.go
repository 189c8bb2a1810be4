package statesync

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// realProcCtl signals through os.Process and reads /proc/PID/stat and
// /proc/PID/schedstat through files kept open per process (a pread each:
// the gate reads them every interval, and open+read+close is three system
// calls where one will do).
type realProcCtl struct {
	mu    sync.Mutex
	files map[*os.Process]*procFiles
}

type procFiles struct{ stat, schedstat *os.File }

func newRealProcCtl() *realProcCtl { return &realProcCtl{files: map[*os.Process]*procFiles{}} }

func (*realProcCtl) stop(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
func (*realProcCtl) cont(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

func (r *realProcCtl) open(p *os.Process) *procFiles {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.files[p]
	if f == nil {
		dir := "/proc/" + strconv.Itoa(p.Pid) + "/"
		f = &procFiles{}
		f.stat, _ = os.Open(dir + "stat")
		f.schedstat, _ = os.Open(dir + "schedstat")
		r.files[p] = f
	}
	return f
}

func (r *realProcCtl) forget(p *os.Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.files[p]; f != nil {
		for _, x := range []*os.File{f.stat, f.schedstat} {
			if x != nil {
				x.Close()
			}
		}
		delete(r.files, p)
	}
}

// pread reads a /proc file from its start (seq_file regenerates it).
func pread(f *os.File, buf []byte) []byte {
	if f == nil {
		return nil
	}
	n, err := f.ReadAt(buf, 0)
	if n <= 0 && err != nil {
		return nil
	}
	return buf[:n]
}

func (r *realProcCtl) busy(p *os.Process) bool {
	var buf [512]byte
	return procStateRunning(pread(r.open(p).stat, buf[:]))
}

func (r *realProcCtl) rounds(p *os.Process) uint64 {
	var buf [128]byte
	return schedstatRounds(pread(r.open(p).schedstat, buf[:]))
}

// procStateRunning reads the state field of /proc/PID/stat: the first
// character after the last ')' (the command name may contain one).
func procStateRunning(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'R'
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
