//go:build netns

package nft

import (
	"context"
	"encoding/binary"
	"testing"

	gnft "github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
)

// Every message of a batch is acknowledged and the kernel queues the acks
// after the transaction without waiting: those that do not fit the socket's
// receive buffer are dropped and the read fails with ENOBUFS (seen with
// 1,053 one-element messages against the default 212,992 bytes, on 6.1 and
// on this kernel alike). These tests shrink the buffer to 48 KiB (~60 acks).

// smallBuf asks for 24 KiB; the kernel doubles it.
const smallBuf = 24 << 10

// TestNetnsSmallReceiveBuffer: with a small receive buffer the cold sync of
// 1,000 × 10 (13,101 elements and the structure: 78 messages) is split
// into transactions whose acknowledgements fit, and the result is complete.
func TestNetnsSmallReceiveBuffer(t *testing.T) {
	ns := netns.NewT(t, "nfr")
	d, err := New(Options{NetNS: int(ns.Handle()), rcvbuf: smallBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	cfg := genConfig(1000, 10)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatalf("cold sync with a %d-byte receive buffer: %v", d.rcvbuf, err)
	}
	st := d.Stats()
	t.Logf("receive buffer %d bytes → %d messages per transaction; cold sync: %d transactions, %d messages (at most %d in one), %d elements",
		d.rcvbuf, d.maxMsgs, st.Batches, st.Messages, st.MaxMessages, st.Elements)
	if st.MaxMessages > uint64(d.maxMsgs) || st.Batches < 2 {
		t.Errorf("want several transactions of at most %d messages: %+v", d.maxMsgs, st)
	}
	// Complete: a fresh dataplane adopting the table writes nothing.
	d2 := newDP(t, ns)
	if err := d2.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if st2 := d2.Stats(); st2.Batches != 0 {
		t.Errorf("the kernel missed part of the sync: a restart wrote %+v", st2)
	}
}

// TestNetnsLostAcksRecovered: when acknowledgements are lost anyway (here:
// the per-transaction limit lifted), the transaction was applied: Apply
// reads the kernel back, finds it converged and succeeds.
func TestNetnsLostAcksRecovered(t *testing.T) {
	ns := netns.NewT(t, "nfr")
	d, err := New(Options{NetNS: int(ns.Handle()), rcvbuf: smallBuf, maxMsgs: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	cfg := genConfig(1000, 10)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatalf("Apply did not recover from lost acknowledgements: %v", err)
	}
	st := d.Stats()
	t.Logf("receive buffer %d bytes, %d messages in one transaction: %d reads (1 = first sync, 1 = after the lost acks), %d transactions",
		d.rcvbuf, st.MaxMessages, st.Reads, st.Batches)
	if st.Reads != 2 {
		t.Errorf("want a read-back after the lost acknowledgements, got %d reads", st.Reads)
	}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d2 := newDP(t, ns)
	if err := d2.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if st2 := d2.Stats(); st2.Batches != 0 {
		t.Errorf("the kernel is not converged: a restart wrote %+v", st2)
	}
}

// TestNetnsAckCost measures how many acknowledged messages one transaction
// may carry with the default receive buffer on the running kernel, and
// checks that ackCost (what dial divides the buffer by) is no less than
// what one acknowledgement really costs.
func TestNetnsAckCost(t *testing.T) {
	ns := netns.NewT(t, "nfa")
	var buf int
	dial := func() *gnft.Conn {
		c, err := gnft.New(gnft.AsLasting(), gnft.WithNetNSFd(int(ns.Handle())), gnft.WithSockOptions(func(c *netlink.Conn) error {
			rc, err := c.SyscallConn()
			if err != nil {
				return err
			}
			return rc.Control(func(fd uintptr) { buf, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
		}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	defer func() { c.CloseLasting() }()
	tb := c.AddTable(&gnft.Table{Family: gnft.TableFamilyIPv4, Name: "acks"})
	set := &gnft.Set{Table: tb, Name: "s", KeyType: gnft.TypeInteger}
	if err := c.AddSet(set, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	// fits sends one transaction of n one-element messages.
	fits := func(n int) bool {
		c.FlushSet(set)
		for i := 1; i < n; i++ {
			k := make([]byte, 4)
			binary.BigEndian.PutUint32(k, uint32(i))
			c.SetAddElements(set, []gnft.SetElement{{Key: k}})
		}
		if err := c.Flush(); err != nil {
			c.CloseLasting()
			c = dial()
			return false
		}
		return true
	}
	lo, hi := 1, 4096
	for lo < hi {
		m := (lo + hi + 1) / 2
		if fits(m) {
			lo = m
		} else {
			hi = m - 1
		}
	}
	cost := buf / lo
	t.Logf("receive buffer %d bytes: %d acknowledged messages fit in one transaction (≈ %d bytes each; ackCost %d → %d allowed)",
		buf, lo, cost, ackCost, buf/ackCost)
	if buf/ackCost > lo {
		t.Errorf("ackCost %d allows %d messages, but only %d fit", ackCost, buf/ackCost, lo)
	}
}
