// Package netns builds throwaway network topologies for tests and the demo:
// named network namespaces, veth pairs, bridges, addresses and routes, all
// over netlink. Nothing here touches the caller's own namespace except to
// create and delete the namespaces themselves.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NS is a named network namespace (visible to `ip netns` as /run/netns/NAME).
type NS struct {
	Name   string
	handle netns.NsHandle
	nl     *netlink.Handle
}

// New creates the named namespace with lo up. It fails if the name exists,
// so two tests never share (and delete) one namespace.
func New(name string) (*NS, error) {
	if len(name) > 64 {
		return nil, fmt.Errorf("netns name %q too long", name)
	}
	sweepOnce.Do(func() { _, _ = Sweep() }) // a killed run's leftovers (owners.go)
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		// A fixed name (the demo's) left by a creator that is gone is
		// reclaimed; anyone else's stays theirs.
		o, ok := readOwner(name)
		if !ok || o.alive() {
			return nil, fmt.Errorf("create netns %q: %w", name, unix.EEXIST)
		}
		if err := reclaim(name); err != nil {
			return nil, err
		}
	}
	if err := ensureNetnsMount(); err != nil {
		return nil, err
	}
	if err := record(name); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	// NewNamed switched this thread into the new namespace: go back first.
	if serr := netns.Set(orig); serr != nil {
		panic(fmt.Sprintf("netns: cannot return to original namespace: %v", serr))
	}
	if err != nil {
		forget(name)
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		_ = netns.DeleteNamed(name)
		forget(name)
		return nil, fmt.Errorf("netlink handle in %q: %w", name, err)
	}
	n := &NS{Name: name, handle: h, nl: nl}
	if err := n.LinkUp("lo"); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Handle returns the namespace's handle (owned by NS; do not close).
func (n *NS) Handle() netns.NsHandle { return n.handle }

// Netlink returns a rtnetlink handle bound to the namespace.
func (n *NS) Netlink() *netlink.Handle { return n.nl }

// Close deletes the namespace; links inside it go with it. Safe to call twice.
func (n *NS) Close() error {
	if n == nil || n.nl == nil {
		return nil
	}
	n.nl.Close()
	n.nl = nil
	n.handle.Close()
	if err := netns.DeleteNamed(n.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", n.Name, err)
	}
	forget(n.Name)
	return nil
}

// Do runs fn on an OS thread switched into the namespace. Sockets created by
// fn stay in the namespace after Do returns.
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	// A fresh goroutine whose thread is discarded if we cannot switch back,
	// so a failure never leaves a pool thread in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			errc <- fmt.Errorf("enter netns %q: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave netns %q: %w", n.Name, err))
			return // thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Exec runs a command inside the namespace (`ip netns exec`), for test
// counterparts such as arping, conntrack, bird or bgpd.
func (n *NS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := n.Command(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in netns %s: %w: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Command prepares (but does not start) a command inside the namespace.
func (n *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Sysctl writes a sysctl inside the namespace, e.g. Sysctl("net.ipv4.ip_forward", "1").
func (n *NS) Sysctl(key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	return n.Do(func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n.Name, err)
		}
		return nil
	})
}

// ReadSysctl reads a sysctl as seen inside the namespace.
func (n *NS) ReadSysctl(key string) (string, error) {
	var v string
	err := n.Do(func() error {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// LinkUp sets a link up.
func (n *NS) LinkUp(name string) error {
	l, err := n.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %q in %s: %w", name, n.Name, err)
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %q up in %s: %w", name, n.Name, err)
	}
	return nil
}

// AddAddr adds an address with its prefix length to a link, e.g. 192.0.2.1/24.
// IPv6 addresses skip DAD so they are usable at once.
func (n *NS) AddAddr(link string, p netip.Prefix) error {
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link %q in %s: %w", link, n.Name, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := n.nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("add %s to %s in %s: %w", p, link, n.Name, err)
	}
	return nil
}

// AddRoute adds dst via gw (a default route when dst is 0.0.0.0/0 or ::/0).
func (n *NS) AddRoute(dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{
		Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
		Gw:  gw.AsSlice(),
	}
	if err := n.nl.RouteAdd(r); err != nil {
		return fmt.Errorf("route %s via %s in %s: %w", dst, gw, n.Name, err)
	}
	return nil
}

// MAC returns a link's hardware address.
func (n *NS) MAC(link string) (net.HardwareAddr, error) {
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return nil, fmt.Errorf("link %q in %s: %w", link, n.Name, err)
	}
	return l.Attrs().HardwareAddr, nil
}

// Veth creates a veth pair with one end in a (named aName) and the other in
// b (named bName), both up. Links are created inside a so nothing is ever
// made in the caller's namespace.
func Veth(a *NS, aName string, b *NS, bName string) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName,
		PeerNamespace: netlink.NsFd(int(b.handle))}
	if err := a.nl.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s(%s)-%s(%s): %w", aName, a.Name, bName, b.Name, err)
	}
	if err := a.LinkUp(aName); err != nil {
		return err
	}
	return b.LinkUp(bName)
}

// Bridge creates a bridge named name inside n, up.
func (n *NS) Bridge(name string) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := n.nl.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s in %s: %w", name, n.Name, err)
	}
	return n.LinkUp(name)
}

// SetMaster enslaves link to bridge inside n.
func (n *NS) SetMaster(link, bridge string) error {
	l, err := n.nl.LinkByName(link)
	if err != nil {
		return fmt.Errorf("link %q in %s: %w", link, n.Name, err)
	}
	br, err := n.nl.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("bridge %q in %s: %w", bridge, n.Name, err)
	}
	if err := n.nl.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("enslave %s to %s in %s: %w", link, bridge, n.Name, err)
	}
	return nil
}

// Listen opens a listener inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket opens a packet listener inside the namespace.
func (n *NS) ListenPacket(network, addr string) (net.PacketConn, error) {
	var l net.PacketConn
	err := n.Do(func() error {
		var err error
		l, err = net.ListenPacket(network, addr)
		return err
	})
	return l, err
}

// DialContext dials from inside the namespace.
func (n *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClient returns a client whose connections originate in the namespace.
// Keep-alives are off so every request is a new connection (a new scheduling
// decision at the load balancer).
func (n *NS) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:       n.DialContext,
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}

// ensureNetnsMount makes /run/netns a shared bind mount of itself, as
// `ip netns add` does. Without it, a later `ip netns add` by anyone turns
// the directory into a mount point and hides (and makes undeletable) every
// namespace file created before.
func ensureNetnsMount() error {
	const dir = "/run/netns"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return nil
		}
	}
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}
