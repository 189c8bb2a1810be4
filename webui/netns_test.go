//go:build netns

package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/conntrack"
)

// TestNetnsLiveFlowsFromConntrack runs the real pipeline: a connection
// through a DNAT'ed VIP in a gateway namespace (marked with proxy.CTMark by a
// throwaway nft table standing in for proxy/nft) → proxy/conntrack → the hub
// → /api/v1/flows, /api/v1/stats and the SSE stream.
func TestNetnsLiveFlowsFromConntrack(t *testing.T) {
	netns.RequireRoot(t)
	cli, gw, be := netns.NewT(t, "wuc"), netns.NewT(t, "wug"), netns.NewT(t, "wub")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netns.Veth(cli, "eth0", gw, "cli0"))
	must(netns.Veth(be, "eth0", gw, "be0"))
	must(cli.AddAddr("eth0", netip.MustParsePrefix("203.0.113.2/24")))
	must(gw.AddAddr("cli0", netip.MustParsePrefix("203.0.113.1/24")))
	must(gw.AddAddr("be0", netip.MustParsePrefix("198.51.100.1/24")))
	must(be.AddAddr("eth0", netip.MustParsePrefix("198.51.100.2/24")))
	must(cli.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("203.0.113.1")))
	must(be.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("198.51.100.1")))
	must(gw.Sysctl("net.ipv4.ip_forward", "1"))
	must(conntrack.EnableAccounting(int(gw.Handle())))
	rules := fmt.Sprintf("table ip elbwebuitest {\n chain pre {\n  type nat hook prerouting priority dstnat; policy accept;\n"+
		"  ip daddr 192.0.2.10 tcp dport 80 ct mark set %#x dnat to 198.51.100.2:8080\n }\n}\n", proxy.CTMark)
	f := filepath.Join(t.TempDir(), "lb.nft")
	must(os.WriteFile(f, []byte(rules), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := gw.Exec(ctx, "nft", "-f", f); err != nil {
		t.Fatalf("nft: %v %s", err, out)
	}
	bl, err := be.Listen("tcp", "198.51.100.2:8080")
	must(err)
	t.Cleanup(func() { bl.Close() })
	go func() {
		for {
			c, err := bl.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	src, err := conntrack.New(conntrack.Options{NetNS: int(gw.Handle()), Resync: 300 * time.Millisecond})
	must(err)
	t.Cleanup(func() { src.Close() })
	m := newFakeManager()
	m.seed(t) // service "web" on 192.0.2.10:80
	s, ts := startServer(t, m, func(o *Options) { o.Flows = src; o.FlowResync = time.Second; o.BatchInterval = 100 * time.Millisecond })
	st := openStream(t, ts.URL, "")
	st.next(t, "snapshot")

	c, err := cli.DialContext(ctx, "tcp", "192.0.2.10:80")
	must(err)
	defer c.Close()
	t0 := time.Now()
	buf := make([]byte, 4000)
	c.Write(buf)
	_, err = io.ReadFull(c, buf)
	must(err)
	client := c.LocalAddr().String()

	// The stream reports the new flow...
	for {
		var d Delta
		must(json.Unmarshal([]byte(st.next(t, "delta").data), &d))
		found := false
		for _, f := range d.New {
			found = found || f.Client == client
		}
		if found {
			break
		}
	}
	t.Logf("flow %s → 192.0.2.10:80 in the SSE stream %v after the connection", client, time.Since(t0).Round(time.Millisecond))

	// ...and, after a resync, the REST API shows its bytes per backend.
	var be8080 BackendStats
	waitFor(t, "backend bytes in /api/v1/stats", func() bool {
		rec := do(t, s.Handler(), "GET", "/api/v1/stats", "", nil)
		var stats []VIPStats
		json.Unmarshal(rec.Body.Bytes(), &stats)
		for _, v := range stats {
			for _, b := range v.Backends {
				if v.Frontend == "192.0.2.10:80" && b.Backend == "198.51.100.2:8080" {
					be8080 = b
				}
			}
		}
		return be8080.BytesIn >= 4000 && be8080.BytesOut >= 4000
	})
	rec := do(t, s.Handler(), "GET", "/api/v1/flows?frontend=192.0.2.10:80", "", nil)
	var fl FlowList
	must(json.Unmarshal(rec.Body.Bytes(), &fl))
	if fl.Total != 1 || fl.Flows[0].Client != client || fl.Flows[0].Backend != "198.51.100.2:8080" || fl.Flows[0].State != "ESTABLISHED" {
		t.Fatalf("flows %+v", fl)
	}
	t.Logf("stats for 198.51.100.2:8080: current %d total %d in %dB out %dB; flow %+v",
		be8080.Current, be8080.Total, be8080.BytesIn, be8080.BytesOut, fl.Flows[0])
}
