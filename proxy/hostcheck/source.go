// Package hostcheck inspects the gateway's own network namespace for things
// that make edgelb misbehave without any error from the kernel: node ports
// inside the ephemeral port range, local listeners hidden by the DNAT, and
// each dataplane's sysctls. It only reads (/proc/sys and /proc/net); it never
// changes anything, and every result carries the command that would fix it.
package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Severity orders findings: an Error makes the daemon refuse to start
// (unless told to proceed), a Warn is printed, an Info is context.
type Severity uint8

const (
	Info Severity = iota
	Warn
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "INFO"
	case Warn:
		return "WARN"
	case Error:
		return "ERROR"
	}
	return fmt.Sprintf("severity(%d)", uint8(s))
}

// Finding is one result of a check. Code is stable (for tests, metrics and
// scripts); Message is for people; Fix, when set, is shell a root user can
// paste (one command per line).
type Finding struct {
	Severity Severity
	Code     string
	Message  string
	Fix      string
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s %s: %s", f.Severity, f.Code, f.Message)
	if f.Fix != "" {
		s += "\n  fix:\n    " + strings.ReplaceAll(f.Fix, "\n", "\n    ")
	}
	return s
}

// Worst returns the highest severity among findings (Info when none).
func Worst(fs []Finding) Severity {
	w := Info
	for _, f := range fs {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w
}

// Source is where the checks read the namespace from. Sys is rooted at
// /proc/sys, Net at a /proc/<task>/net directory.
type Source struct {
	Sys fs.FS
	Net fs.FS
}

// System reads the namespace of the calling OS thread. /proc/thread-self/net
// (not /proc/self/net, which follows the main thread) matters when a caller
// has moved a locked thread into another namespace; /proc/sys/net already
// resolves against the opening thread's namespace.
func System() Source {
	net := "/proc/thread-self/net"
	if _, err := os.Stat(net); err != nil {
		net = "/proc/self/net" // kernels before 3.17
	}
	return Source{Sys: os.DirFS("/proc/sys"), Net: os.DirFS(net)}
}

// FromRoot reads fixtures laid out as DIR/sys/... and DIR/net/... (tests).
func FromRoot(dir string) Source {
	return Source{Sys: os.DirFS(filepath.Join(dir, "sys")), Net: os.DirFS(filepath.Join(dir, "net"))}
}

// SysctlPath maps "net.ipv4.ip_forward" to "net/ipv4/ip_forward" inside Sys.
func SysctlPath(name string) string { return strings.ReplaceAll(name, ".", "/") }

// ReadSysctl returns a sysctl's value with surrounding whitespace trimmed.
// A missing sysctl is reported with fs.ErrNotExist in the chain.
func ReadSysctl(src Source, name string) (string, error) {
	b, err := fs.ReadFile(src.Sys, SysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// isNotExist is errors.Is(err, fs.ErrNotExist), spelled once.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
