//go:build netns

package demo

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsRefusalPerServiceDaemon (issue 14), the real daemon on nftables
// with 100 services from its config file, VIPs announced by L2:
//   - a REST PUT asking for lc answers 422 naming "scheduler" and the ruleset
//     does not change;
//   - the kernel itself refuses one service's change: a REST service "aff"
//     with 7-minute affinity is the only user of the chain post-m-a420000;
//     someone's rule in edgelb's table jumps to it, so dropping aff's
//     affinity (a PUT the engine accepts) needs a chain delete the kernel
//     answers EBUSY. aff is reported failed (edgelb_dataplane_service_refused)
//     and the 100 others still answer arping and HTTP (counts printed).
//
// Before, the whole batch failed, the daemon withdrew every VIP and the
// gateway stopped answering ARP for all of them.
func TestNetnsRefusalPerServiceDaemon(t *testing.T) {
	exe := edgelbBinary(t)
	netns.RequireRoot(t)
	lab, err := New(Options{Prefix: netns.Unique("elbr")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(DemoToken), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pools:\n  - name: many\n    addresses: [\"192.0.2.130-192.0.2.240\"]\nservices:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  - name: s%03d\n    pool: many\n    scheduler: rr\n    ports:\n      - {name: http, port: 80, protocol: TCP, targetPort: %d}\n    backends:\n", i, BackendPort)
		for _, be := range lab.Backends {
			fmt.Fprintf(&b, "      - {address: %q, weight: 1}\n", be.Addr.Addr().String())
		}
	}
	fmt.Fprintf(&b, "announce:\n  l2:\n    interface: %s\ndataplane:\n  mode: nftables\n  nodeAddresses: [%q]\napi:\n  listen: %s\n  tokenFile: %s\nstate:\n  dir: %s\n",
		lab.FrontIf, GatewayFront.Addr(), apiAddr, token, filepath.Join(dir, "state"))
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &issue8Lab{Lab: lab, logs: &bytes.Buffer{}, api: lab.Gateway.HTTPClient(5 * time.Second), cfg: cfg}
	d, err := lab.StartDaemon(exe, cfg, &syncWriter{w: l.logs}, &syncWriter{w: l.logs})
	if err != nil {
		t.Fatal(err)
	}
	l.d = d
	t.Cleanup(func() {
		d.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("daemon log:\n%s", lastN(l.logs.String(), 60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := lab.WaitAPI(ctx, apiAddr, d); err != nil {
		t.Fatalf("%v\n%s", err, l.logs.String())
	}
	vips := make([]netip.Addr, 100)
	for i := range vips {
		vips[i] = netip.AddrFrom4([4]byte{192, 0, 2, byte(130 + i)})
	}
	hc := lab.Client.HTTPClient(3 * time.Second)
	count := func(what string) (arp, httpOK int) {
		for _, v := range vips {
			if len(arping(t, lab, v, 1)) == 1 {
				arp++
			}
			if body, err := lab.Get(context.Background(), hc, "http://"+v.String()+"/"); err == nil && body != "" {
				httpOK++
			}
		}
		t.Logf("%s: %d of 100 VIPs answer arping, %d of 100 answer HTTP", what, arp, httpOK)
		return arp, httpOK
	}
	waitFor(t, "100 services programmed", 60*time.Second, 200*time.Millisecond, func() bool {
		out, err := lab.Gateway.Exec(context.Background(), "nft", "list", "map", "ip", "edgelb", "vip")
		return err == nil && strings.Count(string(out), "192.0.2.") >= 100
	})
	if a, h := count("at start"); a != 100 || h != 100 {
		t.Fatalf("at start: %d arping, %d HTTP of 100", a, h)
	}

	// 1. lc through REST: 422 naming the field, the ruleset unchanged.
	before := ruleset(t, l)
	be := `"backends":[` + backendJSON(lab) + `]`
	code, body := l.do(t, "PUT", "/api/v1/services/lc", `{"name":"lc","pool":"many","scheduler":"lc","ports":[{"name":"http","port":80,"targetPort":8080}],`+be+`}`)
	t.Logf("PUT lc → %d %s", code, strings.TrimSpace(string(body)))
	if code != 422 || !strings.Contains(string(body), `"scheduler"`) {
		t.Fatalf("PUT lc: %d %s, want 422 naming scheduler", code, body)
	}
	time.Sleep(500 * time.Millisecond) // a (wrongly) accepted change would have reached the kernel by now
	if after := ruleset(t, l); after != before {
		t.Fatalf("the ruleset changed after a refused PUT")
	}
	t.Logf("ruleset unchanged after the refused PUT (%d bytes)", len(before))

	// 2. The kernel refuses one service.
	code, body = l.do(t, "PUT", "/api/v1/services/aff", `{"name":"aff","pool":"many","scheduler":"rr","affinityTimeout":"7m","ports":[{"name":"http","port":80,"targetPort":8080}],`+be+`}`)
	if code != 201 && code != 200 {
		t.Fatalf("PUT aff: %d %s", code, body)
	}
	waitFor(t, "aff's chain", 20*time.Second, 100*time.Millisecond, func() bool {
		out, _ := lab.Gateway.Exec(context.Background(), "nft", "list", "chain", "ip", "edgelb", "post-m-a420000")
		return strings.Contains(string(out), "post-m-a420000")
	})
	if out, err := lab.Gateway.Exec(context.Background(), "sh", "-c",
		"nft add chain ip edgelb someone-elses && nft add rule ip edgelb someone-elses jump post-m-a420000"); err != nil {
		t.Fatalf("foreign jump: %v %s", err, out)
	}
	code, body = l.do(t, "PUT", "/api/v1/services/aff", `{"name":"aff","pool":"many","scheduler":"rr","ports":[{"name":"http","port":80,"targetPort":8080}],`+be+`}`)
	if code != 200 && code != 201 {
		t.Fatalf("PUT aff without affinity: %d %s", code, body)
	}
	var refused []string
	waitFor(t, "aff reported refused", 30*time.Second, 100*time.Millisecond, func() bool {
		refused = l.metrics(t, "edgelb_dataplane_service_refused{")
		return len(refused) > 0
	})
	t.Logf("metric: %v", refused)
	if len(refused) != 1 || !strings.Contains(refused[0], `service="aff/http"`) || !strings.HasSuffix(refused[0], " 1") {
		t.Fatalf("refused series %v, want only aff/http = 1", refused)
	}
	code, body = l.do(t, "GET", "/api/v1/services/aff", "")
	t.Logf("GET aff → %d %s", code, strings.TrimSpace(string(body)))
	if a, h := count("with aff refused by the kernel"); a != 100 || h != 100 {
		t.Fatalf("with one service refused: %d arping, %d HTTP of the other 100", a, h)
	}
	if !strings.Contains(l.logs.String(), "dataplane refused a service") {
		t.Errorf("no log line for the refused service")
	}
}

func backendJSON(l *Lab) string {
	var parts []string
	for _, be := range l.Backends {
		parts = append(parts, fmt.Sprintf(`{"address":%q}`, be.Addr.Addr().String()))
	}
	return strings.Join(parts, ",")
}

func lastN(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
