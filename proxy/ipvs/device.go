package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// DefaultDevice is the dummy link that holds the VIPs (kube-proxy's
// kube-ipvs0 idea): VIP traffic is then local and enters IPVS, and an
// address on this link is what makes a virtual service edgelb's.
const DefaultDevice = "edgelb0"

// linkDevice is the real device over rtnetlink, in the dataplane's namespace.
type linkDevice struct {
	nl   *netlink.Handle
	name string
}

func (d *linkDevice) link() (netlink.Link, error) {
	l, err := d.nl.LinkByName(d.name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, nil
		}
		return nil, fmt.Errorf("ipvs: look up link %s: %w", d.name, err)
	}
	return l, nil
}

func (d *linkDevice) Ensure() error {
	l, err := d.link()
	if err != nil {
		return err
	}
	if l == nil {
		la := netlink.NewLinkAttrs()
		la.Name = d.name
		if err := d.nl.LinkAdd(&netlink.Dummy{LinkAttrs: la}); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return fmt.Errorf("ipvs: create dummy link %s: the kernel has no dummy link type (CONFIG_DUMMY, module dummy): %w: %w", d.name, proxy.ErrKernelFeature, err)
			}
			return fmt.Errorf("ipvs: create dummy link %s: %w", d.name, err)
		}
		if l, err = d.nl.LinkByName(d.name); err != nil {
			return fmt.Errorf("ipvs: look up link %s: %w", d.name, err)
		}
	} else if l.Type() != "dummy" {
		return fmt.Errorf("ipvs: device %s exists but is a %s link, not edgelb's dummy", d.name, l.Type())
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := d.nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("ipvs: set %s up: %w", d.name, err)
		}
	}
	return nil
}

func (d *linkDevice) Addrs() (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	l, err := d.link()
	if err != nil || l == nil {
		return out, err
	}
	as, err := d.nl.AddrList(l, netlink.FAMILY_ALL)
	// A dump racing an address change (IPv6 addrconf on a fresh link) is
	// flagged interrupted: read again.
	for i := 0; i < 5 && errors.Is(err, netlink.ErrDumpInterrupted); i++ {
		as, err = d.nl.AddrList(l, netlink.FAMILY_ALL)
	}
	if err != nil {
		return nil, fmt.Errorf("ipvs: list addresses of %s: %w", d.name, err)
	}
	for _, a := range as {
		// The kernel's own IPv6 link-local address is no VIP.
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() {
			out[ip.Unmap()] = true
		}
	}
	return out, nil
}

func hostAddr(a netip.Addr) *netlink.Addr {
	bits := a.BitLen()
	na := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}}
	if a.Is6() {
		na.Flags = unix.IFA_F_NODAD // usable at once
	}
	return na
}

func (d *linkDevice) AddAddr(a netip.Addr) error {
	l, err := d.link()
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("ipvs: add %s: link %s is gone", a, d.name)
	}
	if err := d.nl.AddrAdd(l, hostAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("ipvs: add VIP %s to %s: %w", a, d.name, err)
	}
	return nil
}

func (d *linkDevice) DelAddr(a netip.Addr) error {
	l, err := d.link()
	if err != nil || l == nil {
		return err
	}
	if err := d.nl.AddrDel(l, hostAddr(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("ipvs: remove VIP %s from %s: %w", a, d.name, err)
	}
	return nil
}

func (d *linkDevice) Delete() error {
	l, err := d.link()
	if err != nil || l == nil {
		return err
	}
	if err := d.nl.LinkDel(l); err != nil {
		return fmt.Errorf("ipvs: delete link %s: %w", d.name, err)
	}
	return nil
}

// isNotExist: IPVS answers ESRCH for a missing service and ENOENT for a
// missing destination.
func isNotExist(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}
