// Package sysctl sets the kernel settings a dataplane needs: one list per
// dataplane in proxy/hostcheck (the same lists `edgelb check` reports and
// systemd/sysctl.d ships), written inside the dataplane's network namespace.
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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
			got, err := hostcheck.ReadSysctl(hostcheck.System(), s.Name)
			switch {
			case errors.Is(err, fs.ErrNotExist) && s.Optional:
				continue
			case errors.Is(err, fs.ErrNotExist) && s.Module() != "":
				errs = append(errs, fmt.Errorf("set %s=%s: %s is not loaded (modprobe %[3]s; systemd/modules-load.d/edgelb.conf loads it at boot): %w", s.Name, s.Want, s.Module(), err))
				continue
			case err == nil && got == s.Want:
				continue
			}
			p := "/proc/sys/" + hostcheck.SysctlPath(s.Name)
			if err := os.WriteFile(p, []byte(s.Want), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("set %s=%s (set it in /etc/sysctl.d; %s): %w", s.Name, s.Want, s.Why, err))
			}
		}
		return errors.Join(errs...)
	})
}
