//go:build failover

package statesync

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestFailoverSyncLag: two real conntrackd (Debian's 1.4.7) in two
// namespaces, FTFW over unicast UDP. The lag the status reports is what a
// peer has not acknowledged and how long no peer was heard from: near 0
// while the peer runs, growing once it is gone (every new connection waits
// for an acknowledgement), back to near 0 when it returns.
func TestFailoverSyncLag(t *testing.T) {
	a, b, addrA, addrB := syncPair(t, "lg", netip.MustParseAddr("10.99.0.1"))
	dir := t.TempDir()
	start := func(ns *netns.NS, self, peer netip.Addr) *Conntrackd {
		t.Helper()
		return startIn(t, dir, ns, Options{Interface: "sync0", Address: self, Peer: peer, Port: 3780})
	}
	ca := start(a, addrA, addrB)
	defer ca.Close()
	cb := start(b, addrB, addrA)
	defer func() { cb.Close() }()

	// New connections in a's table: conntrackd sees them as events and
	// sends each to its peer.
	sport := 20000
	insert := func(n int) {
		t.Helper()
		insertConns(t, a, sport, n)
		sport += n
	}
	// until polls a's status (conntrackd's counters are read in the
	// background every PeerPoll) until ok holds, and returns the status
	// that satisfied it.
	until := func(what string, limit time.Duration, ok func(Status) bool) Status {
		t.Helper()
		end := time.Now().Add(limit)
		for {
			st := ca.Status()
			if ok(st) {
				return st
			}
			if time.Now().After(end) {
				t.Fatalf("%s: not within %v; last status: %+v, silence %v", what, limit, st.Stats, st.PeerSilence)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	insert(50)
	until("b holds a's 50 connections", 20*time.Second, func(Status) bool { return cb.Status().Stats.External >= 50 })
	healthy := until("a: every message acknowledged", 20*time.Second, func(st Status) bool { return st.Stats.Unacked <= 2 })
	// The peer sends at least one packet a second; reads are >= 1 s apart,
	// so a read sees none only if the peer stalled for over a second.
	var worst time.Duration
	for range 5 {
		time.Sleep(1100 * time.Millisecond)
		st := ca.Status()
		worst = max(worst, st.PeerSilence)
		if st.Stats.Unacked > 2 {
			t.Fatalf("peer running, yet %d messages unacknowledged", st.Stats.Unacked)
		}
	}
	if worst >= 5*time.Second {
		t.Fatalf("peer running, yet a read saw it silent for %v", worst)
	}
	t.Logf("MEASURED sync-lag phase=peer-up unacked=%d unsent=%d silence_max_ms=%d", healthy.Stats.Unacked, healthy.Stats.Unsent, worst.Milliseconds())

	cb.Close()
	insert(50)
	gone := until("a: the 50 new messages wait for an acknowledgement and the peer is silent", 30*time.Second, func(st Status) bool {
		return st.Stats.Unacked >= 50 && st.PeerSilence >= 3*time.Second && st.PeerState == PeerDead
	})
	if gone.LastPacket.IsZero() || gone.LastPacket.After(time.Now().Add(-3*time.Second)) {
		t.Errorf("peer silent for %v, yet its last packet is stamped %v", gone.PeerSilence, gone.LastPacket)
	}
	t.Logf("MEASURED sync-lag phase=peer-down unacked=%d unsent=%d silence_ms=%d", gone.Stats.Unacked, gone.Stats.Unsent, gone.PeerSilence.Milliseconds())

	back := time.Now()
	cb = start(b, addrB, addrA)
	up := until("a: acknowledged again after the peer returned", 30*time.Second, func(st Status) bool {
		return st.Stats.Unacked <= 2 && st.PeerSilence < 3*time.Second && st.PeerState == PeerAlive
	})
	// The returning peer asked for a resync (Restart's steps): it holds a's
	// connections again, those it missed included.
	until("b holds all 100 connections again", 30*time.Second, func(Status) bool { return cb.Status().Stats.External >= 100 })
	t.Logf("MEASURED sync-lag phase=peer-back unacked=%d silence_ms=%d caught_up_ms=%d", up.Stats.Unacked, up.PeerSilence.Milliseconds(), time.Since(back).Milliseconds())
}

// syncPair makes two namespaces (prefix+"a", prefix+"b") joined by a veth
// named sync0, addressed first and first+1 in a /24.
func syncPair(t *testing.T, prefix string, first netip.Addr) (a, b *netns.NS, addrA, addrB netip.Addr) {
	t.Helper()
	a, b = netns.NewT(t, prefix+"a"), netns.NewT(t, prefix+"b")
	addrA, addrB = first, first.Next()
	wire(t, a, b, "sync0", addrA, addrB)
	return a, b, addrA, addrB
}

// wire joins a and b with a veth named link at both ends, up and
// addressed addrA and addrB in a /24.
func wire(t *testing.T, a, b *netns.NS, link string, addrA, addrB netip.Addr) {
	t.Helper()
	if err := netns.Veth(a, link, b, link); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		ns   *netns.NS
		addr netip.Addr
	}{{a, addrA}, {b, addrB}} {
		if err := x.ns.AddAddr(link, netip.PrefixFrom(x.addr, 24)); err != nil {
			t.Fatal(err)
		}
		if err := x.ns.LinkUp(link); err != nil {
			t.Fatal(err)
		}
	}
}

// startIn starts a real conntrackd with opts (Binary and Dir filled in)
// inside ns and waits until it answers. A wrapper script runs it in the
// namespace (its netlink socket must see that namespace's conntrack table);
// exec keeps it the supervised child.
func startIn(t *testing.T, dir string, ns *netns.NS, opts Options) *Conntrackd {
	t.Helper()
	bin := filepath.Join(dir, "conntrackd-"+ns.Name)
	if err := os.WriteFile(bin, fmt.Appendf(nil, "#!/bin/sh\nexec ip netns exec %s conntrackd \"$@\"\n", ns.Name), 0o755); err != nil {
		t.Fatal(err)
	}
	opts.Binary, opts.Dir = bin, filepath.Join(dir, ns.Name)
	c, err := Start(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Ready():
	case <-time.After(15 * time.Second):
		c.Close()
		t.Fatalf("conntrackd in %s not ready in 15 s", ns.Name)
	}
	return c
}

// insertConns puts n established TCP connections into ns's conntrack table
// (source ports from+1 .. from+n): one event each for conntrackd to sync.
func insertConns(t *testing.T, ns *netns.NS, from, n int) {
	t.Helper()
	for i := from + 1; i <= from+n; i++ {
		if out, err := ns.Exec(context.Background(), "conntrack", "-I", "-p", "tcp", "-s", "192.0.2.10", "-d", "198.51.100.10",
			"--sport", fmt.Sprint(i), "--dport", "80", "--state", "ESTABLISHED", "-t", "600", "-u", "SEEN_REPLY"); err != nil {
			t.Fatalf("conntrack -I: %v: %s", err, out)
		}
	}
}
