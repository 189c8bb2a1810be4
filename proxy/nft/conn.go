package nft

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// The netlink connection: its buffers, its dial and redial.

// sndbuf and rcvbuf are the socket buffers asked for: a cold sync of
// 10,000 services is ~5 MB of elements, sent in batches of at most a
// quarter of the send buffer (1 MiB); each message of a batch is
// acknowledged, and the acknowledgements must fit the receive buffer
// (8 MiB after the kernel doubles it: 8,192 messages, see ackCost).
const (
	sndbuf    = 8 << 20
	rcvbuf    = 4 << 20
	maxBudget = 1 << 20
)

func (d *Dataplane) dial() error {
	var snd, rcv int
	setBuf := func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		return rc.Control(func(fd uintptr) {
			s := int(fd)
			// The FORCE variants exceed net.core.[wr]mem_max (CAP_NET_ADMIN
			// in the initial user namespace); without it, ask within them.
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sndbuf) != nil {
				_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
			}
			want := rcvbuf
			if d.opts.rcvbuf > 0 {
				want = d.opts.rcvbuf
			}
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, want) != nil {
				_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, want)
			}
			snd, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF)
			rcv, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF)
			if sa, err := unix.Getsockname(s); err == nil {
				if nl, ok := sa.(*unix.SockaddrNetlink); ok {
					d.portid.Store(nl.Pid)
				}
			}
			// Read-backs in 32 KiB steps (dumpsize.go); without it they
			// only take longer.
			_ = primeDumpSize(s)
		})
	}
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(setBuf)}
	if d.opts.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(d.opts.NetNS))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return kernelErr("nft: open netlink", err)
	}
	d.conn = c
	d.budget = min(max(snd/4, 32<<10), maxBudget)
	d.rcvbuf = rcv
	// Room for the structural messages beside the elements is left by
	// flushBatch, which sends them apart when they do not fit.
	d.maxMsgs = max(rcv/ackCost, 16)
	if d.opts.maxMsgs > 0 {
		d.maxMsgs = d.opts.maxMsgs
	}
	return nil
}

// redial replaces the connection after a failed batch, so nothing left
// buffered or unread on the old socket leaks into the next one.
func (d *Dataplane) redial() {
	if d.conn != nil {
		d.conn.CloseLasting()
	}
	if err := d.dial(); err != nil {
		d.opts.Log.Warn("nft: reopen netlink", "err", err)
	}
}

func (d *Dataplane) reset() {
	d.svcs = map[proxy.Key]*svcState{}
	d.fronts = map[frontend]proxy.Key{}
	d.nodes = map[netip.Addr]bool{}
	d.chains = map[famChain]int{}
	d.hints, d.hintBE, d.order = nil, nil, nil
	d.synced, d.dirty = false, false
	d.clean.Forget()
	if d.nextID == 0 {
		d.nextID = 1
	}
}
