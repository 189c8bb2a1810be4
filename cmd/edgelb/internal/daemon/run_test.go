package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	annfake "github.com/edgelb/edgelb/announce/fake"
	"github.com/edgelb/edgelb/lab/ports"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/fake"
)

// TestRunOnFakes (issue 14): the whole daemon — config file → engine (the
// one writer, on a bbolt store) → effects loop → dataplane and announcers —
// without root or a kernel: Run takes proxy/fake with nftables' rules and a
// recording announcer. A dual-stack service with a node port is programmed
// whole (a VIP per family and a node-port service per family; the fake, like
// nftables, would refuse one mixing families) and both VIPs are announced;
// cancelling Run shuts it down cleanly and closes the announcer.
func TestRunOnFakes(t *testing.T) {
	dp := fake.New(fake.NFTablesOptions)
	ann := &annfake.Announcer{}
	_, stop := runOnFakes(t, `
  - name: web
    pool: p
    families: [IPv4, IPv6]
    ports:
      - {name: http, port: 80, protocol: TCP, targetPort: 8080, nodePort: 30080}
    backends:
      - {address: "198.51.100.2", weight: 1}
      - {address: "2001:db8:1::2", weight: 1}
`, dp, ann)

	want := []string{
		`service 192.0.2.0:80/TCP name="web/http"`,
		`service [2001:db8::]:80/TCP name="web/http"`,
		`service nodeport:30080/TCP name="web/http/nodeport"`,
		`service nodeport6:30080/TCP name="web/http/nodeport"`,
		"backend 192.0.2.0:80/TCP 198.51.100.2:8080 ",
		"backend [2001:db8::]:80/TCP [2001:db8:1::2]:8080 ",
		"backend nodeport:30080/TCP 198.51.100.2:8080 ",
		"backend nodeport6:30080/TCP [2001:db8:1::2]:8080 ",
		"nodeaddr 203.0.113.1", "nodeaddr 2001:db8:ff::1",
	}
	var tr string
	programmed := func() bool {
		tr = dp.Transcript()
		for _, w := range want {
			if !strings.Contains(tr, w) {
				return false
			}
		}
		return true
	}
	// Polls the fake, not the REST API: no rate limit involved.
	for deadline := time.Now().Add(30 * time.Second); !programmed(); time.Sleep(20 * time.Millisecond) { // a hang guard
		if time.Now().After(deadline) {
			t.Fatalf("the fake dataplane never held the service; transcript:\n%s", tr)
		}
	}
	if n := strings.Count(tr, "service "); n != 4 {
		t.Errorf("%d services programmed, want 4:\n%s", n, tr)
	}
	announced := func() bool {
		v, _ := ann.Last()
		var got []string
		for _, x := range v {
			got = append(got, x.Addr.String())
		}
		return slices.Equal(got, []string{"192.0.2.0", "2001:db8::"})
	}
	for deadline := time.Now().Add(30 * time.Second); !announced(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for both VIPs announced")
		}
	}
	t.Logf("programmed on the fake dataplane (%d applies):\n%s", dp.Applies(), tr)

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if closed, _ := ann.Closed(); !closed {
		t.Error("the announcer was not closed at shutdown")
	}
}

// runOnFakes writes a config with pool p (192.0.2.0/28, 2001:db8::/124)
// and the given services section, and runs the daemon on dp and ann until
// stop (which returns Run's error). It returns the API's address.
func runOnFakes(t *testing.T, services string, dp *fake.Dataplane, ann announce.Announcer) (api string, stop func() error) {
	t.Helper()
	dir := t.TempDir()
	api = freeLoopbackPort(t)
	cfg := `pools:
  - name: p
    addresses: ["192.0.2.0/28", "2001:db8::/124"]
services:` + services + `dataplane:
  nodeAddresses: ["203.0.113.1", "2001:db8:ff::1"]
api:
  listen: ` + api + `
state:
  dir: ` + filepath.Join(dir, "state") + "\n"
	path := filepath.Join(dir, "edgelb.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = Run(ctx, Options{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Dataplane: dp, Announcers: []announce.Announcer{ann}})
	}()
	stop = func() error {
		cancel()
		select {
		case <-done:
			return runErr
		case <-time.After(30 * time.Second):
			return errors.New("Run did not return within 30 s of its context ending")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return api, stop
}

// freeLoopbackPort is a loopback address:port free a moment ago, below the
// ephemeral range (the config refuses port 0; lab/ports says why not the
// kernel's pick).
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(ports.MustFree(t))
}

// TestRunRefusedServiceShowsFailed (issue 14): a service the dataplane
// refuses at apply (here the fake's Check refuses "bad"; on a gateway, the
// kernel) is refused alone through the whole daemon: "web" is programmed
// and announced, "bad" is neither, and its REST status says why (the engine
// used to look the refusal up by the rendered name "bad/http" under the
// service's name "bad" and showed nothing).
func TestRunRefusedServiceShowsFailed(t *testing.T) {
	dp := fake.New(fake.Options{Name: "fake-refusing", Check: func(s proxy.Service) error {
		if strings.HasPrefix(s.Name, "bad/") {
			return errors.New("kernel says no")
		}
		return nil
	}})
	ann := &annfake.Announcer{}
	api, stop := runOnFakes(t, `
  - name: web
    pool: p
    ports: [{name: http, port: 80, protocol: TCP}]
    backends: [{address: "198.51.100.2", weight: 1}]
  - name: bad
    pool: p
    ports: [{name: http, port: 80, protocol: TCP}]
    backends: [{address: "198.51.100.3", weight: 1}]
`, dp, ann)

	status := func(name string) (failed string, vips []string) {
		resp, err := http.Get("http://" + api + "/api/v1/services/" + name)
		if err != nil {
			return "", nil
		}
		defer resp.Body.Close()
		var st struct {
			Failed   string   `json:"failed"`
			Assigned []string `json:"assigned"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
			return "", nil
		}
		return st.Failed, st.Assigned
	}
	// At most 10 requests a second (the API answers 429 above 20).
	var why string
	var badVIPs []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if why, badVIPs = status("bad"); why != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bad never shown failed; transcript:\n%s", dp.Transcript())
		}
	}
	if !strings.Contains(why, "kernel says no") {
		t.Errorf("bad failed %q, want the dataplane's reason", why)
	}
	if w, _ := status("web"); w != "" {
		t.Errorf("web shown failed too: %q", w)
	}
	tr := dp.Transcript()
	if !strings.Contains(tr, `name="web/http"`) || strings.Contains(tr, `name="bad/http"`) {
		t.Errorf("want web programmed and bad not:\n%s", tr)
	}
	v, _ := ann.Last()
	var announced []string
	for _, x := range v {
		announced = append(announced, x.Addr.String())
	}
	if len(badVIPs) != 1 || slices.Contains(announced, badVIPs[0]) || len(announced) != 1 {
		t.Errorf("announced %v; bad holds %v and must not be among them, web's VIP must", announced, badVIPs)
	}
	t.Logf("bad: failed %q, VIP %v not announced; announced %v", why, badVIPs, announced)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunReadyAfterStartupMetrics: the moment /readyz first says ready,
// /metrics already has the start-up phases. Ready used to follow the first
// apply alone, before the ready callback registered them, and a lab read
// 0.000 for phases it scraped in between.
func TestRunReadyAfterStartupMetrics(t *testing.T) {
	api, stop := runOnFakes(t, `
  - name: web
    pool: p
    ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080}]
    backends: [{address: "198.51.100.2"}]
`, fake.New(fake.NFTablesOptions), &annfake.Announcer{})
	defer stop()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + api + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// 60 ms between polls: under the API's 20 requests a second.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(60 * time.Millisecond) {
		if code, _ := get("/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready within 30 s")
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, p := range []string{"config", "checks", "writer", "apply", "total"} {
		if !strings.Contains(body, `edgelb_startup_seconds{phase="`+p+`"}`) {
			t.Errorf("ready, yet /metrics has no start-up phase %q", p)
		}
	}
}
