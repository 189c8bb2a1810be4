package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgelb/edgelb/proxy"
	mobyipvs "github.com/moby/ipvs"
)

// ErrTimeout is returned when the kernel does not answer an IPVS request in
// time. moby/ipvs retries a receive that timed out forever; the guard closes
// the socket to end the call and opens a new one for the next request.
var ErrTimeout = errors.New("no answer from the kernel")

// mobyHandle is the real handle: every call to moby/ipvs goes through call,
// which holds the one mutex, bounds the call with a timeout and turns a panic
// inside the library into an error.
type mobyHandle struct {
	mu      sync.Mutex
	path    string // network namespace path, "" = the caller's
	timeout time.Duration
	h       *mobyipvs.Handle
}

func newMobyHandle(path string, timeout time.Duration) (*mobyHandle, error) {
	m := &mobyHandle{path: path, timeout: timeout}
	if err := m.call("open", func(*mobyipvs.Handle) error { return nil }); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *mobyHandle) call(op string, fn func(h *mobyipvs.Handle) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		h, err := mobyipvs.New(m.path)
		if err != nil {
			return fmt.Errorf("ipvs: open netlink socket (netns %q): %w", m.path, err)
		}
		m.h = h
	}
	h := m.h
	err := guarded(op, m.timeout, func() error { return fn(h) }, func() {
		// Closing the socket wakes the blocked receive (moby/ipvs retries
		// EAGAIN forever). The next call opens a fresh socket.
		h.Close()
	})
	if errors.Is(err, ErrTimeout) {
		m.h = nil
	}
	return err
}

// guarded runs fn on the calling goroutine with a watchdog: if fn has not
// returned after timeout, abort runs (it must make fn return soon, e.g. by
// closing the socket fn reads) and the result is ErrTimeout. A panic inside
// fn becomes an error. No goroutine hand-off per call: under an emulated
// CPU each hand-off costs milliseconds, and a sync makes thousands of calls.
func guarded(op string, timeout time.Duration, fn func() error, abort func()) (err error) {
	var fired atomic.Bool
	t := time.AfterFunc(timeout, func() {
		fired.Store(true)
		abort()
	})
	defer func() {
		t.Stop()
		if r := recover(); r != nil {
			err = fmt.Errorf("ipvs %s: moby/ipvs panicked: %v", op, r)
		}
		if fired.Load() {
			err = fmt.Errorf("ipvs %s: %w within %s", op, ErrTimeout, timeout)
		}
	}()
	if err := fn(); err != nil {
		return fmt.Errorf("ipvs %s: %w", op, err)
	}
	return nil
}

func (m *mobyHandle) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		m.h.Close()
		m.h = nil
	}
	return nil
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

func toMobyService(s virtualServer) *mobyipvs.Service {
	if s.Key.Mark != 0 {
		// moby/ipvs sends the mark instead of address, protocol and port.
		return &mobyipvs.Service{FWMark: s.Key.Mark, SchedName: s.Sched, Flags: s.Flags, Timeout: s.Timeout,
			Netmask: s.Netmask, AddressFamily: family(s.Key.Addr)}
	}
	return &mobyipvs.Service{
		Address:       net.IP(s.Key.Addr.AsSlice()),
		Protocol:      uint16(s.Key.Proto),
		Port:          s.Key.Port,
		SchedName:     s.Sched,
		Flags:         s.Flags,
		Timeout:       s.Timeout,
		Netmask:       s.Netmask,
		AddressFamily: family(s.Key.Addr),
	}
}

// keyService is enough of a service for destination commands and deletes.
func keyService(k vsKey) *mobyipvs.Service {
	return toMobyService(virtualServer{Key: k, Netmask: defaultNetmask(k.Addr)})
}

func toMobyDest(d realServer) *mobyipvs.Destination {
	return &mobyipvs.Destination{
		Address:         net.IP(d.Addr.Addr().AsSlice()),
		Port:            d.Addr.Port(),
		Weight:          d.Weight,
		ConnectionFlags: d.Fwd & fwdMask,
		AddressFamily:   family(d.Addr.Addr()),
	}
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func counters(s mobyipvs.SvcStats) Counters {
	return Counters{Connections: uint64(s.Connections), PacketsIn: uint64(s.PacketsIn), PacketsOut: uint64(s.PacketsOut),
		BytesIn: s.BytesIn, BytesOut: s.BytesOut, CPS: uint64(s.CPS)}
}

func (m *mobyHandle) Services() ([]virtualServer, error) {
	var out []virtualServer
	err := m.call("list services", func(h *mobyipvs.Handle) error {
		svcs, err := h.GetServices()
		if err != nil {
			return err
		}
		for _, s := range svcs {
			key := vsKey{Addr: addrOf(s.Address), Port: s.Port, Proto: protoOf(s.Protocol)}
			if s.FWMark != 0 {
				// The kernel sends no address for a firewall-mark service:
				// its family says which (the sync's ownership rule decides
				// whether it is edgelb's).
				fam := proxy.IPv4
				if s.AddressFamily == syscall.AF_INET6 {
					fam = proxy.IPv6
				}
				key = markKey(s.FWMark, fam)
			}
			out = append(out, virtualServer{
				Key:   key,
				Sched: s.SchedName, Flags: s.Flags, Timeout: s.Timeout, Netmask: s.Netmask,
				Stats: counters(s.Stats),
			})
		}
		return nil
	})
	return out, err
}

func (m *mobyHandle) Dests(k vsKey) ([]realServer, error) {
	var out []realServer
	err := m.call("list destinations of "+k.String(), func(h *mobyipvs.Handle) error {
		ds, err := h.GetDestinations(keyService(k))
		if err != nil {
			return err
		}
		for _, d := range ds {
			a := addrOf(d.Address)
			out = append(out, realServer{
				Addr: netip.AddrPortFrom(a, d.Port), Weight: d.Weight, Fwd: d.ConnectionFlags & fwdMask,
				Active: d.ActiveConnections, Inactive: d.InactiveConnections, Stats: counters(mobyipvs.SvcStats(d.Stats)),
			})
		}
		return nil
	})
	return out, err
}

func (m *mobyHandle) AddService(s virtualServer) error {
	return m.call("add service "+s.Key.String(), func(h *mobyipvs.Handle) error { return h.NewService(toMobyService(s)) })
}

func (m *mobyHandle) UpdateService(s virtualServer) error {
	return m.call("update service "+s.Key.String(), func(h *mobyipvs.Handle) error { return h.UpdateService(toMobyService(s)) })
}

func (m *mobyHandle) DelService(k vsKey) error {
	return m.call("delete service "+k.String(), func(h *mobyipvs.Handle) error { return h.DelService(keyService(k)) })
}

func (m *mobyHandle) AddDest(k vsKey, d realServer) error {
	return m.call(fmt.Sprintf("add destination %s to %s", d.Addr, k), func(h *mobyipvs.Handle) error {
		return h.NewDestination(keyService(k), toMobyDest(d))
	})
}

func (m *mobyHandle) UpdateDest(k vsKey, d realServer) error {
	return m.call(fmt.Sprintf("update destination %s of %s", d.Addr, k), func(h *mobyipvs.Handle) error {
		return h.UpdateDestination(keyService(k), toMobyDest(d))
	})
}

func (m *mobyHandle) DelDest(k vsKey, d realServer) error {
	return m.call(fmt.Sprintf("delete destination %s of %s", d.Addr, k), func(h *mobyipvs.Handle) error {
		return h.DelDestination(keyService(k), toMobyDest(d))
	})
}
