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

	before := ca.Status().Stats.SentPackets
	// One shell inserts them (a process per entry, not two): several
	// hundred events a second, well above the gate's gateRoundsPerSec.
	var script strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&script, "conntrack -I -p tcp -s 192.0.2.11 -d 198.51.100.11 --sport %d --dport 80 --state ESTABLISHED -t 600 -u SEEN_REPLY >/dev/null 2>&1 || exit 1\n", 30000+i)
	}
	t0 := time.Now()
	if out, err := a.Exec(context.Background(), "sh", "-c", script.String()); err != nil {
		t.Fatalf("conntrack -I: %v: %s", err, out)
	}
	took := time.Since(t0)
	end := time.Now().Add(30 * time.Second)
	for cb.Status().Stats.External < n {
		if time.Now().After(end) {
			t.Fatalf("the peer holds %d of the %d connections after 30 s", cb.Status().Stats.External, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	arrived := time.Since(t0)
	time.Sleep(1100 * time.Millisecond) // a fresh read of the counters
	sent := ca.Status().Stats.SentPackets - before
	// A client command holds the gate open (TestGateCycles checks that);
	// here its time is only reported.
	q0 := time.Now()
	if _, err := ca.command(context.Background(), "-s"); err != nil {
		t.Fatal(err)
	}
	answered := time.Since(q0)
	t.Logf("MEASURED sync-coalesced connections=%d inserted_in_ms=%d arrived_in_ms=%d datagrams=%d per_connection=%.2f command_ms=%d (coalesce %s)",
		n, took.Milliseconds(), arrived.Milliseconds(), sent, float64(sent)/n, answered.Milliseconds(), every)
	// Ungated, each event is a round and a datagram of its own (~n); the
	// bound leaves room for the ungated first interval, alive messages and
	// a probe interval. The gate needs more than 50 events/s to batch: one
	// shell inserts ~270/s here (it would take a machine five times slower).
	if sent >= n/2 {
		t.Fatalf("%d datagrams for %d connections: the sender was not coalesced", sent, n)
	}
}
