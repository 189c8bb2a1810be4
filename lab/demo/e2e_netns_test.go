//go:build netns || ui

package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"

	"github.com/edgelb/edgelb/lab/netns"

	"github.com/edgelb/edgelb/lab/edgelbbin"
)

// edgelbBinary is the daemon under test, built once per test binary.
var edgelbBinary = edgelbbin.Path

func TestMain(m *testing.M) { edgelbbin.Main(m) }

// startLab builds the lab and runs the real daemon in its gateway.
func startLab(t *testing.T) (*Lab, *Daemon, *bytes.Buffer) {
	t.Helper()
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	lab, err := New(Options{Prefix: netns.Unique("elbe2e")})
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
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(lab.Config(filepath.Join(dir, "state"), "127.0.0.1:8080", "rr", token)), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	d, err := lab.StartDaemon(exe, cfg, &syncWriter{w: logs}, &syncWriter{w: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lab.WaitAPI(ctx, "127.0.0.1:8080", d); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	return lab, d, logs
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// spread sends n requests (a new connection each) and counts answers per backend.
func spread(t *testing.T, lab *Lab, url string, n int) map[string]int {
	t.Helper()
	c := lab.Client.HTTPClient(2 * time.Second)
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		name, err := lab.Get(context.Background(), c, url)
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, url, err)
		}
		counts[name]++
	}
	return counts
}

func TestNetnsDaemonForwardsVIPAndNodePort(t *testing.T) {
	lab, _, _ := startLab(t)
	for _, tc := range []struct{ name, url string }{
		{"VIP", fmt.Sprintf("http://%s/", netip.AddrPortFrom(VIP, 80))},
		{"NodePort", fmt.Sprintf("http://%s/", netip.AddrPortFrom(GatewayFront.Addr(), NodePort))},
	} {
		before := map[string]map[string]int{}
		for _, b := range lab.Backends {
			before[b.Name] = b.Peers()
		}
		const n = 300
		counts := spread(t, lab, tc.url, n)
		t.Logf("%s: %d requests → %s", tc.name, n, Format(counts))
		for _, b := range lab.Backends {
			if got := counts[b.Name]; got < n/5 {
				t.Errorf("%s: backend %s got %d of %d (< 20%%)", tc.name, b.Name, got, n)
			}
			// SNAT: every new request reached the backend from the gateway's address.
			for peer, k := range b.Peers() {
				if k > before[b.Name][peer] && peer != GatewayBack.Addr().String() {
					t.Errorf("%s: backend %s saw source %s, want the gateway %s (SNAT)", tc.name, b.Name, peer, GatewayBack.Addr())
				}
			}
		}
	}
	out, err := lab.Gateway.Exec(context.Background(), "conntrack", "-L", "-d", VIP.String())
	if err != nil {
		t.Fatal(err)
	}
	flows := strings.Count(string(out), "dport=80")
	t.Logf("conntrack -L -d %s in the gateway: %d flows", VIP, flows)
	if flows == 0 {
		t.Fatalf("conntrack lists no flow to the VIP:\n%s", out)
	}
}

var arpingReply = regexp.MustCompile(`(?i)reply from [0-9.]+ \[([0-9a-f:]+)\]`)

// arping resolves vip from the client and returns the MACs that answered.
func arping(t *testing.T, lab *Lab, vip netip.Addr, count int) []string {
	t.Helper()
	out, _ := lab.Client.Exec(context.Background(), "arping", "-c", fmt.Sprint(count), "-w", fmt.Sprint(count+1), "-I", "eth0", vip.String())
	var macs []string
	for _, m := range arpingReply.FindAllStringSubmatch(string(out), -1) {
		macs = append(macs, strings.ToLower(m[1]))
	}
	return macs
}

// arpingSettles probes vip with one arping at a time until it is answered
// (answered) or silent (!answered), for up to limit; it returns how long
// that took. The announcer acts on its own goroutine after the API or the
// health checker changed the state: on a busy machine, later than any fixed
// pause would allow.
func arpingSettles(t *testing.T, lab *Lab, vip netip.Addr, answered bool, limit time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for {
		if (len(arping(t, lab, vip, 1)) > 0) == answered {
			return time.Since(t0)
		}
		if time.Since(t0) > limit {
			t.Fatalf("arping %s: answered=%v not reached in %s", vip, answered, limit)
		}
	}
}

func TestNetnsDaemonARP(t *testing.T) {
	lab, _, _ := startLab(t)
	gwMAC, err := lab.Gateway.MAC(lab.FrontIf)
	if err != nil {
		t.Fatal(err)
	}
	macs := arping(t, lab, VIP, 3)
	t.Logf("arping -c 3 %s from the client: %d replies %v (gateway %s)", VIP, len(macs), macs, gwMAC)
	if len(macs) != 3 {
		t.Fatalf("want 3 ARP replies for the VIP, got %d", len(macs))
	}
	for _, m := range macs {
		if m != gwMAC.String() {
			t.Fatalf("VIP resolved to %s, want the gateway's %s", m, gwMAC)
		}
	}

	// Capture ARP on the client while a new service's VIP appears.
	vip2 := netip.MustParseAddr("192.0.2.101")
	var cl *arp.Client
	if err := lab.Client.Do(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		cl, err = arp.Dial(ifi)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	garp := make(chan string, 1)
	go func() {
		for {
			cl.SetReadDeadline(time.Now().Add(10 * time.Second))
			p, _, err := cl.Read()
			if err != nil {
				close(garp)
				return
			}
			if p.SenderIP == vip2 && p.TargetIP == vip2 {
				garp <- p.SenderHardwareAddr.String()
				return
			}
		}
	}()
	api := lab.Gateway.HTTPClient(5 * time.Second)
	body := `{"name":"web2","vips":["192.0.2.101"],"ports":[{"port":80,"targetPort":8080}],"backends":[{"address":"198.51.100.11"}]}`
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:8080/api/v1/services/web2", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+DemoToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := api.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT service: %s %s", resp.Status, rb)
	}
	select {
	case mac, ok := <-garp:
		if !ok {
			t.Fatal("no gratuitous ARP for the new VIP within 10 s")
		}
		t.Logf("gratuitous ARP captured on the client: %s is-at %s", vip2, mac)
		if mac != gwMAC.String() {
			t.Fatalf("gratuitous ARP from %s, want %s", mac, gwMAC)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no gratuitous ARP for the new VIP")
	}
	if macs := arping(t, lab, vip2, 2); len(macs) != 2 {
		t.Fatalf("new VIP: %d ARP replies, want 2", len(macs))
	}

	req, _ = http.NewRequest(http.MethodDelete, "http://127.0.0.1:8080/api/v1/services/web2", nil)
	req.Header.Set("Authorization", "Bearer "+DemoToken)
	resp, err = api.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE service: %s", resp.Status)
	}
	// The announcer withdraws on its own goroutine after the API answered:
	// wait for the silence itself, then three more probes must get none.
	gone := arpingSettles(t, lab, vip2, false, time.Minute)
	macs = arping(t, lab, vip2, 3)
	t.Logf("after the service is removed: arping %s silent %v after the DELETE answered; then → %d replies of 3", vip2, gone.Round(time.Millisecond), len(macs))
	if len(macs) != 0 {
		t.Fatalf("something still answers for the removed VIP: %v", macs)
	}
}

// TestNetnsDaemonStopCleansUp: SIGTERM with withdrawOnShutdown (the default)
// leaves no nft table in the gateway.
func TestNetnsDaemonStopCleansUp(t *testing.T) {
	lab, d, logs := startLab(t)
	if out, err := lab.Gateway.Exec(context.Background(), "nft", "list", "tables"); err != nil || !strings.Contains(string(out), "edgelb") {
		t.Fatalf("no edgelb table while running: %s %v", out, err)
	}
	if err := d.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs)
	}
	out, err := lab.Gateway.Exec(context.Background(), "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "edgelb") {
		t.Fatalf("table left after SIGTERM: %s", out)
	}
}
