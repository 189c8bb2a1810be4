//go:build failover

package statesync

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestFailoverSyncCoalesced: two real conntrackd in namespaces, the sender
// gated (Options.Coalesce). A burst of new connections reaches the peer
// whole, in far fewer datagrams than connections (conntrackd packs an
// interval's messages together), and a client command is answered at once
// although the daemon spends most of its time stopped.
func TestFailoverSyncCoalesced(t *testing.T) {
	const n = 400
	a, b, addrA, addrB := syncPair(t, "cg", netip.MustParseAddr("10.99.1.1"))
	dir := t.TempDir()
	every := 100 * time.Millisecond
	g, stopGate := startGate(every) // as StartMesh does
	defer stopGate()
	ca := startIn(t, dir, a, Options{Interface: "sync0", Address: addrA, Peer: addrB, Port: 3781, Coalesce: every, gate: g})
	defer ca.Close()
	cb := startIn(t, dir, b, Options{Interface: "sync0", Address: addrB, Peer: addrA, Port: 3781})
	defer cb.Close()

	// The gate batches once it counted more than gateRoundsPerSec rounds a
	// second (counted once a second while ungated, TestGateCycles) and the
	// start steps' gateAfterHold is over: a warm-up load until then, then
	// the burst, inside the gated time before its first probe (gateProbe).
	insert := func(from, count int) {
		t.Helper()
		var script strings.Builder
		for i := from; i < from+count; i++ {
			fmt.Fprintf(&script, "conntrack -I -p tcp -s 192.0.2.11 -d 198.51.100.11 --sport %d --dport 80 --state ESTABLISHED -t 600 -u SEEN_REPLY >/dev/null 2>&1 || exit 1\n", i)
		}
		if out, err := a.Exec(context.Background(), "sh", "-c", script.String()); err != nil {
			t.Fatalf("conntrack -I: %v: %s", err, out)
		}
	}
	// Gated, and past the 5 s the start steps keep it open (gateAfterHold).
	warm := 0
	for deadline := time.Now().Add(20 * time.Second); !g.batching(); warm += 50 {
		if time.Now().After(deadline) {
			t.Fatalf("the gate did not engage in 20 s of %d new connections", warm)
		}
		insert(20000+warm, 50)
	}
	sentNow := func() uint64 {
		t.Helper()
		out, err := ca.command(context.Background(), "-s") // a fresh read, not the cached Status
		if err != nil {
			t.Fatal(err)
		}
		return ParseStats(out).SentPackets
	}
	before := sentNow()
	t0 := time.Now()
	insert(30001, n)
	took := time.Since(t0)
	end := time.Now().Add(30 * time.Second)
	for cb.Status().Stats.External < uint64(warm+n) {
		if time.Now().After(end) {
			t.Fatalf("the peer holds %d of the %d connections after 30 s", cb.Status().Stats.External, warm+n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	arrived := time.Since(t0)
	sent := sentNow() - before
	// A client command holds the gate open (TestGateCycles checks that);
	// here its time is only reported.
	q0 := time.Now()
	if _, err := ca.command(context.Background(), "-s"); err != nil {
		t.Fatal(err)
	}
	answered := time.Since(q0)
	t.Logf("MEASURED sync-coalesced connections=%d inserted_in_ms=%d arrived_in_ms=%d datagrams=%d per_connection=%.2f command_ms=%d (coalesce %s; gated after a warm-up of %d)",
		n, took.Milliseconds(), arrived.Milliseconds(), sent, float64(sent)/n, answered.Milliseconds(), every, warm)
	// Ungated, each event is a round and a datagram of its own (~n); the
	// bound leaves room for alive messages and the acknowledgements' rounds.
	// The gate needs more than 50 events/s to batch: one shell inserts
	// ~270/s here (it would take a machine five times slower).
	if sent >= n/2 {
		t.Fatalf("%d datagrams for %d connections: the sender was not coalesced", sent, n)
	}
}
