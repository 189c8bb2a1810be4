//go:build failover

package statesync

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestFailoverCommitTimeout: the owner's closed connections must not
// become connections for days on the gateway that takes over. With the
// nftables dataplane's event mask (destroy,assured: README) a peer hears of
// a connection when it is established and when it is destroyed, nothing in
// between, so a connection closed on the owner stays ESTABLISHED in the
// peers' external caches for the 120 s its TIME_WAIT entry lives. When the
// owner dies in that window its DESTROY never comes, and a takeover
// commits the entry into the kernel as ESTABLISHED. Real conntrackd on both
// ends, real TCP through an nftables rule with that mask; b takes over
// while a's closed connections are in TIME_WAIT. Twice: with conntrackd's
// own estimate (CommitTimeout 0, the baseline: the closed connections get
// 5 days) and with the default commit timeout (they get at most it).
func TestFailoverCommitTimeout(t *testing.T) {
	t.Run("conntrackd-estimate", func(t *testing.T) {
		worst, established := commitAfterClose(t, 0)
		if established != 50 {
			t.Fatalf("b's table holds %d ESTABLISHED entries after the commit, want all 50: the 40 closed on a among them", established)
		}
		if worst < 24*60*60 {
			t.Fatalf("with conntrackd's estimate a closed connection's entry lives %d s: the ghost this test guards against is gone, revisit DefaultCommitTimeout", worst)
		}
	})
	t.Run("default", func(t *testing.T) {
		if worst, _ := commitAfterClose(t, DefaultCommitTimeout); worst > int(DefaultCommitTimeout.Seconds()) {
			t.Fatalf("a committed entry lives %d s, longer than the commit timeout %v: connections closed on a live on for days on b",
				worst, DefaultCommitTimeout)
		}
	})
}

// commitAfterClose runs the scenario with commitTimeout on b and returns
// the longest timeout among b's committed entries, in seconds, and how
// many of them are ESTABLISHED.
func commitAfterClose(t *testing.T, commitTimeout time.Duration) (worst, established int) {
	a, b, addrA, addrB := syncPair(t, "ct", netip.MustParseAddr("10.99.2.1"))
	client := netns.NewT(t, "ctc")
	srv, cli := netip.MustParseAddr("10.97.0.1"), netip.MustParseAddr("10.97.0.2")
	wire(t, a, client, "data0", srv, cli)
	// The mask on the first packet, before conntrack confirms the entry, as
	// the dataplane's nat chain sets it.
	rules := fmt.Sprintf(`table inet committest {
	chain pre {
		type filter hook prerouting priority -150;
		ip daddr %s tcp dport 8080 ct state new ct event set destroy,assured
	}
}`, srv)
	if out, err := a.Exec(context.Background(), "sh", "-c", "echo '"+rules+"' | nft -f -"); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	ln, err := a.Listen("tcp", netip.AddrPortFrom(srv, 8080).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }() // echo until the client closes
		}
	}()
	dir := t.TempDir()
	ca := startIn(t, dir, a, Options{Interface: "sync0", Address: addrA, Peer: addrB, Port: 3790})
	defer ca.Close()
	cb := startIn(t, dir, b, Options{Interface: "sync0", Address: addrB, Peer: addrA, Port: 3790, CommitTimeout: commitTimeout})
	defer cb.Close()

	const closed, open = 40, 10
	ctx := context.Background()
	dial := func() net.Conn {
		t.Helper()
		c, err := client.DialContext(ctx, "tcp", netip.AddrPortFrom(srv, 8080).String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for range closed {
		dial().Close() // the client closes first; the server's echo ends and closes too
	}
	for range open {
		c := dial()
		defer c.Close()
	}
	waitFor(t, "b's external cache holds all 50 connections", func() bool { return cb.Status().Stats.External >= closed+open })
	waitFor(t, fmt.Sprintf("a's table holds the %d closed ones in TIME_WAIT", closed), func() bool {
		return count(table(t, a, srv), "TIME_WAIT") == closed
	})
	if n := cb.Status().Stats.External; n != closed+open {
		t.Fatalf("b's external cache holds %d entries, want %d (no DESTROY yet)", n, closed+open)
	}

	// a dies (no DESTROY is ever sent for the closed ones); b takes over.
	ca.Close()
	if err := cb.Gaining(ctx, []netip.Addr{srv}); err != nil {
		t.Fatal(err)
	}
	var got []entry
	waitFor(t, "b's table holds the committed 50", func() bool {
		got = table(t, b, srv)
		return len(got) >= closed+open
	})
	for _, e := range got {
		worst = max(worst, e.timeout)
	}
	t.Logf("MEASURED statesync-commit commit_timeout_s=%d closed_on_owner=%d entries=%d established=%d timeout_max_s=%d",
		int(commitTimeout.Seconds()), closed, len(got), count(got, "ESTABLISHED"), worst)
	return worst, count(got, "ESTABLISHED")
}

// entry is one line of `conntrack -L`: its state and seconds left.
type entry struct {
	state   string
	timeout int
}

// table lists ns's TCP conntrack entries to dst port 8080.
func table(t *testing.T, ns *netns.NS, dst netip.Addr) []entry {
	t.Helper()
	// Stdout alone: conntrack's count line goes to stderr, and combined
	// output can land in the middle of an entry's line.
	out, err := ns.Command(context.Background(), "conntrack", "-L", "-p", "tcp", "-d", dst.String(), "--dport", "8080").Output()
	if err != nil {
		t.Fatalf("conntrack -L in %s: %v", ns.Name, err)
	}
	var es []entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // tcp 6 431999 ESTABLISHED src=...
		if len(f) < 4 || f[0] != "tcp" {
			continue
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("conntrack -L: %q: %v", sc.Text(), err)
		}
		es = append(es, entry{state: f[3], timeout: n})
	}
	return es
}

func count(es []entry, state string) int {
	n := 0
	for _, e := range es {
		if e.state == state {
			n++
		}
	}
	return n
}
