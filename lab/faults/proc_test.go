//go:build netns || k8s || failover

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procCPU is a process's user+system CPU time from /proc/PID/stat
// (utime, stime).
func procCPU(pid int) time.Duration { return statTicks(pid, 11, 12) }

// reapedCPU is the user+system CPU of pid's children it has waited for
// (cutime, cstime: e.g. the conntrackd client commands that have exited).
func reapedCPU(pid int) time.Duration { return statTicks(pid, 13, 14) }

// statTicks sums two clock-tick fields of /proc/PID/stat, counted from the
// field after the command (which may hold spaces, so after the last ")").
func statTicks(pid, a, b int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= max(a, b) {
		return 0
	}
	x, _ := strconv.ParseInt(f[a], 10, 64)
	y, _ := strconv.ParseInt(f[b], 10, 64)
	return time.Duration(x+y) * time.Second / 100 // USER_HZ is 100 on Linux
}

// childPIDs lists the direct children of ppid whose command is comm.
func childPIDs(ppid int, comm string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i || s[i+1:j] != comm {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			continue
		}
		if pp, _ := strconv.Atoi(f[1]); pp == ppid {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}
