//go:build netns

package demo

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lab/forwarding"
)

// TestNetnsNATNoSNAT: method nat-nosnat on this kernel's nftables
// dataplane. The lab's backends route through the gateway (default route
// via 198.51.100.1); each backend sees the client's own address, and the
// replies come back through the gateway, which un-DNATs them to the client.
func TestNetnsNATNoSNAT(t *testing.T) {
	l := startIssue8Lab(t, labConfig{Method: "nat-nosnat", Mode: "nftables"})
	ctx := context.Background()
	client := ClientAddr.Addr().String()
	match := fmt.Sprintf("ip saddr 198.51.100.0/24 ip daddr %s tcp sport %d", client, BackendPort)
	replies, err := forwarding.NewCounter(ctx, l.Gateway, match)
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	counts := spread(t, l.Lab, vipURL, n)
	t.Logf("nat-nosnat: %d requests from %s to %s → %s", n, client, vipURL, Format(counts))
	for _, b := range l.Backends {
		peers := b.Peers()
		t.Logf("backend %s (%s) saw sources %v", b.Name, b.Addr, peers)
		if peers[client] == 0 || len(peers) != 1 {
			t.Errorf("%s saw %v, want only the client %s (no SNAT)", b.Name, peers, client)
		}
	}
	got, err := replies.Packets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway: %d reply packets from the backends to the client's own address arrived (nft counter: %s)", got, match)
	if got < n {
		t.Errorf("gateway saw %d reply packets for %d requests: replies did not come back through it", got, n)
	}
	out, err := l.Gateway.Exec(ctx, "conntrack", "-L", "-p", "tcp", "-d", VIP.String())
	if err != nil {
		t.Fatal(err)
	}
	// Reply tuple: src=BACKEND dst=CLIENT (no SNAT: the gateway's address would be there otherwise).
	re := regexp.MustCompile(`src=` + regexp.QuoteMeta(client) + ` dst=` + regexp.QuoteMeta(VIP.String()) +
		` .*?src=198\.51\.100\.1[1-3] dst=` + regexp.QuoteMeta(client) + ` (.*)`)
	pk := regexp.MustCompile(`packets=(\d+)`) // present with conntrack accounting (the daemon turns it on)
	flows, replyPkts := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			flows++
			if p := pk.FindStringSubmatch(m[1]); p != nil {
				k, _ := strconv.Atoi(p[1])
				replyPkts += k
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("gateway conntrack: %d flows client→VIP with reply tuple backend→client (%d reply packets); e.g. %s", flows, replyPkts, lines[0])
	if flows == 0 {
		t.Errorf("no conntrack flow shows the un-SNATed reply tuple:\n%s", out)
	}
}
