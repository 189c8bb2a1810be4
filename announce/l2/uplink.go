package l2

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Uplink reports whether the L2 interface can carry traffic. A gateway whose
// uplink is down (administratively, or no carrier) cannot answer ARP nor
// forward: it gives its VIPs up so another gateway takes them.
type Uplink interface {
	// Watch sends the current state at once, then every change, until ctx
	// ends (then it closes the channel).
	Watch(ctx context.Context) (<-chan bool, error)
}

// NetlinkUplink watches a link of the current network namespace over
// rtnetlink (no polling).
type NetlinkUplink struct{ Interface string }

// linkUp: administratively up and running (carrier present). Operstate is
// not used: several drivers (and veth before its peer is up) report
// "unknown" while RUNNING is accurate.
func linkUp(l netlink.Link) bool {
	a := l.Attrs()
	return a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_RUNNING != 0
}

// Watch implements Uplink.
func (u NetlinkUplink) Watch(ctx context.Context) (<-chan bool, error) {
	updates := make(chan netlink.LinkUpdate, 16)
	done := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{}); err != nil {
		return nil, fmt.Errorf("l2: watch link %q: %w", u.Interface, err)
	}
	// The initial state is read after subscribing so no change is missed in between.
	up := false
	if l, err := netlink.LinkByName(u.Interface); err == nil {
		up = linkUp(l)
	}
	out := make(chan bool, 1)
	out <- up
	go func() {
		defer close(out)
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case upd, ok := <-updates:
				if !ok {
					return
				}
				if upd.Link == nil || upd.Link.Attrs().Name != u.Interface {
					continue
				}
				now := linkUp(upd.Link) && upd.Header.Type != unix.RTM_DELLINK
				if now == up {
					continue
				}
				up = now
				select {
				case out <- up:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
