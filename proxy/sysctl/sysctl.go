// Package sysctl sets the kernel settings a dataplane needs: one list per
// dataplane in proxy/hostcheck (the same lists `edgelb check` reports and
// systemd/sysctl.d ships), written inside the dataplane's network namespace.
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/nsthread"
)

// Ensure writes each setting of want whose value differs, inside the
// network namespace nsfd (0: the caller's own). It reads first and writes
// only what differs, so a read-only /proc/sys that sysctl.d already set is
// fine. An Optional setting that does not exist (IPv6 disabled) is skipped;
// any other that cannot be read or written is an error naming it.
func Ensure(nsfd int, want []hostcheck.Sysctl) error {
	return nsthread.Do(nsfd, func() error {
		var errs []error
		for _, s := range want {
			// /proc/sys/net resolves against the opening thread's namespace.
			p := "/proc/sys/" + hostcheck.SysctlPath(s.Name)
			b, err := os.ReadFile(p)
			switch {
			case errors.Is(err, fs.ErrNotExist) && s.Optional:
				continue
			case errors.Is(err, fs.ErrNotExist) && module(s.Name) != "":
				errs = append(errs, fmt.Errorf("set %s=%s: %s is not loaded (modprobe %[3]s; systemd/modules-load.d/edgelb.conf loads it at boot): %w", s.Name, s.Want, module(s.Name), err))
				continue
			case err == nil && strings.TrimSpace(string(b)) == s.Want:
				continue
			}
			if err := os.WriteFile(p, []byte(s.Want), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("set %s=%s (set it in /etc/sysctl.d; %s): %w", s.Name, s.Want, s.Why, err))
			}
		}
		return errors.Join(errs...)
	})
}

// module is the kernel module whose loading creates the setting ("" for
// the core ones).
func module(name string) string {
	switch {
	case strings.HasPrefix(name, "net.netfilter.nf_conntrack_"):
		return "nf_conntrack"
	case strings.HasPrefix(name, "net.ipv4.vs."):
		return "ip_vs"
	}
	return ""
}
