package syncd

import (
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// Fake is a Kernel in memory that obeys the kernel's rules (see Kernel):
// ENODEV for an interface it was not told about, EEXIST for a role already
// running, EINVAL for a bad state or a group that is not multicast, ESRCH
// for stopping a role that is not running. It fills the kernel's defaults in
// what List reports, as the kernel does.
type Fake struct {
	mu      sync.Mutex
	ifaces  map[string]bool
	running map[Role]Params
	// Calls counts Start and Stop calls that reached the fake (refused
	// ones included), so tests can see that a converged Set changes nothing.
	Calls int
	// FailList makes List fail with this error (nil = answer).
	FailList error
}

// NewFake returns a Fake whose namespace has the named interfaces.
func NewFake(ifaces ...string) *Fake {
	f := &Fake{ifaces: map[string]bool{}, running: map[Role]Params{}}
	for _, i := range ifaces {
		f.ifaces[i] = true
	}
	return f
}

func (f *Fake) Start(role Role, p Params) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	wrap := func(e unix.Errno) error {
		return fmt.Errorf("ipvs sync daemon (fake): start %s on %q: %w", role, p.Interface, e)
	}
	// In the kernel's order: the netlink policy and the group check
	// (ip_vs_genl_new_daemon), the interface lookup, then the running
	// role and the state (start_sync_thread).
	if p.Interface == "" || len(p.Interface) > ifNameMax {
		return wrap(unix.EINVAL)
	}
	if p.Group.IsValid() && !p.Group.IsMulticast() {
		return wrap(unix.EINVAL)
	}
	if !f.ifaces[p.Interface] {
		return wrap(unix.ENODEV)
	}
	if role != Master && role != Backup {
		return wrap(unix.EINVAL)
	}
	if _, ok := f.running[role]; ok {
		return wrap(unix.EEXIST)
	}
	if !p.Group.IsValid() {
		p.Group = DefaultGroup
	}
	if p.Port == 0 {
		p.Port = DefaultPort
	}
	if p.TTL == 0 {
		p.TTL = DefaultTTL
	}
	if p.MaxLen == 0 {
		p.MaxLen = 1472 // an MTU of 1500 less the IPv4 and UDP headers
	}
	f.running[role] = p
	return nil
}

func (f *Fake) Stop(role Role) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	if _, ok := f.running[role]; !ok {
		return fmt.Errorf("ipvs sync daemon (fake): stop %s: %w", role, unix.ESRCH)
	}
	delete(f.running, role)
	return nil
}

func (f *Fake) List() ([]Daemon, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailList != nil {
		return nil, f.FailList
	}
	var out []Daemon
	for r, p := range f.running {
		out = append(out, Daemon{Role: r, Params: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out, nil
}
