//go:build ipvsguest

// DR and tunnel through the real IPVS of the guest kernel (make test-ipvs):
// real HTTP from a client namespace, backends prepared by backendsetup, the
// backend logs the client's own address, and the director sees only the
// inbound half of every connection.
package forwarding

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/ipvs"
)

func TestIPVSGuestDirectRouting(t *testing.T) { runMethod(t, proxy.DirectRouting, "fdr") }

func TestIPVSGuestTunnel(t *testing.T) { runMethod(t, proxy.Tunnel, "ftu") }

const requests = 24

func runMethod(t *testing.T, m proxy.Method, prefix string) {
	netns.RequireRoot(t)
	if err := ipvs.Available(); err != nil {
		t.Fatalf("the guest kernel must have IPVS: %v", err)
	}
	ctx := context.Background()
	lab := New(t, prefix, m, 2)
	dp, err := ipvs.New(ipvs.Options{NetNS: "/run/netns/" + lab.Director.Name, SetSysctls: true, CallTimeout: 30 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Cleanup(context.Background()); dp.Close() })

	svc := lab.Service()
	cfg := proxy.Config{Services: []proxy.Service{svc}}
	if m == proxy.DirectRouting {
		// The control: the same director and backends under nat (which
		// masquerades to the director's address) on VIP:8080 → :80. Its
		// replies must come back through IPVS, so the counters below can tell.
		nat := svc
		nat.Name, nat.Port, nat.Method = "fwd/nat-control", 8080, proxy.NAT
		cfg.Services = append(cfg.Services, nat)
	}
	if err := dp.Apply(ctx, cfg); err != nil {
		t.Fatalf("apply %s: %v", m, err)
	}
	if out, err := lab.Director.Exec(ctx, "ipvsadm", "-Ln"); err == nil {
		t.Logf("director: ipvsadm -Ln\n%s", out)
	}

	vipMatch := fmt.Sprintf("ip daddr %s tcp dport %d", VIP, Port)
	replyMatch := fmt.Sprintf("ip saddr %s tcp sport %d", VIP, Port)
	dirIn := counter(t, lab.Director, vipMatch)
	dirReply := counter(t, lab.Director, replyMatch)
	rtrReply := counter(t, lab.Router, replyMatch)

	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(VIP, Port))
	got := map[string]int{}
	for i := 0; i < requests; i++ {
		name, peer, err := Get(ctx, lab.Client, url)
		if err != nil {
			t.Fatalf("%s request %d: %v", m, i, err)
		}
		if peer.Addr() != ClientAddr {
			t.Fatalf("%s: %s saw the connection from %s, want the client's own %s", m, name, peer, ClientAddr)
		}
		got[name]++
	}
	t.Logf("%s: %d requests from %s → %v; every reply said the peer was %s", m, requests, ClientAddr, got, ClientAddr)
	for _, b := range lab.Backends {
		peers := b.Server.Peers()
		t.Logf("%s: backend %s (%s) log: %v", m, b.Name, b.Addr, peers)
		if peers[ClientAddr] == 0 || len(peers) != 1 {
			t.Errorf("%s: backend %s saw %v, want only the client %s", m, b.Name, peers, ClientAddr)
		}
	}

	st := waitStats(t, dp, netip.AddrPortFrom(VIP, Port), requests)
	var in, out uint64
	for _, d := range st.Dests {
		t.Logf("%s: IPVS real server %s: conns=%d inpkts=%d outpkts=%d inbytes=%d outbytes=%d",
			m, d.Backend, d.Counters.Connections, d.Counters.PacketsIn, d.Counters.PacketsOut, d.Counters.BytesIn, d.Counters.BytesOut)
		in += d.Counters.PacketsIn
		out += d.Counters.PacketsOut
	}
	if in == 0 || out != 0 {
		t.Errorf("%s: IPVS counters inpkts=%d outpkts=%d, want inbound > 0 and outbound 0 (replies bypass the director)", m, in, out)
	}
	di, dr, rr := read(t, dirIn), read(t, dirReply), read(t, rtrReply)
	t.Logf("%s: director packets to the VIP=%d, director reply packets from the VIP=%d, router reply packets from the VIP=%d",
		m, di, dr, rr)
	if di == 0 || dr != 0 || rr == 0 {
		t.Errorf("%s: want the director to see inbound packets only (got in=%d reply=%d) and the replies at the router (got %d)", m, di, dr, rr)
	}

	if m == proxy.DirectRouting {
		natURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(VIP, 8080))
		for i := 0; i < 6; i++ {
			_, peer, err := Get(ctx, lab.Client, natURL)
			if err != nil {
				t.Fatalf("nat control request %d: %v", i, err)
			}
			if peer.Addr() != DirectorAddr {
				t.Fatalf("nat control: backend saw %s, want the director %s (masquerade)", peer, DirectorAddr)
			}
		}
		nst := waitStats(t, dp, netip.AddrPortFrom(VIP, 8080), 6)
		var nin, nout uint64
		for _, d := range nst.Dests {
			nin += d.Counters.PacketsIn
			nout += d.Counters.PacketsOut
		}
		t.Logf("nat control on the same lab: IPVS inpkts=%d outpkts=%d (replies pass the director under nat)", nin, nout)
		if nout == 0 {
			t.Errorf("nat control: outpkts=0; the counters could not tell the methods apart")
		}
	}
}

func counter(t *testing.T, ns *netns.NS, match string) *Counter {
	t.Helper()
	c, err := NewCounter(context.Background(), ns, match)
	if err != nil {
		t.Fatalf("nft counter in %s: %v", ns.Name, err)
	}
	return c
}

func read(t *testing.T, c *Counter) uint64 {
	t.Helper()
	n, err := c.Packets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitStats polls the service's counters until they account for conns
// connections: IPVS folds them in from a 2-second estimator.
func waitStats(t *testing.T, dp *ipvs.Dataplane, front netip.AddrPort, conns uint64) ipvs.ServiceStats {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		all, err := dp.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Frontend != front {
				continue
			}
			var n uint64
			for _, d := range s.Dests {
				n += d.Counters.Connections
			}
			if n >= conns || time.Now().After(deadline) {
				if n < conns {
					t.Logf("IPVS counts %d of %d connections after 15 s", n, conns)
				}
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stats for %s: %v", front, strings.TrimSpace(fmt.Sprint(all)))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
