package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
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
	dir := t.TempDir()
	cfg := `pools:
  - name: p
    addresses: ["192.0.2.0/28", "2001:db8::/124"]
services:
  - name: web
    pool: p
    families: [IPv4, IPv6]
    ports:
      - {name: http, port: 80, protocol: TCP, targetPort: 8080, nodePort: 30080}
    backends:
      - {address: "198.51.100.2", weight: 1}
      - {address: "2001:db8:1::2", weight: 1}
dataplane:
  nodeAddresses: ["203.0.113.1", "2001:db8:ff::1"]
api:
  listen: ` + freeLoopbackPort(t) + `
state:
  dir: ` + filepath.Join(dir, "state") + "\n"
	path := filepath.Join(dir, "edgelb.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dp := fake.New(fake.NFTablesOptions)
	ann := &closeAnn{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = Run(ctx, Options{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Dataplane: dp, Announcers: []announce.Announcer{ann}})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("Run did not return within 15 s of its context ending")
		}
	})

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
	for deadline := time.Now().Add(10 * time.Second); !programmed(); time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("Run returned early: %v", runErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake dataplane never held the service; transcript:\n%s", tr)
		}
	}
	if n := strings.Count(tr, "service "); n != 4 {
		t.Errorf("%d services programmed, want 4:\n%s", n, tr)
	}
	eventually(t, "both VIPs announced", func() bool {
		v, _ := ann.last()
		var got []string
		for _, x := range v {
			got = append(got, x.Addr.String())
		}
		return slices.Equal(got, []string{"192.0.2.0", "2001:db8::"})
	})
	t.Logf("programmed on the fake dataplane (%d applies):\n%s", dp.Applies(), tr)

	cancel()
	select {
	case <-done:
		if runErr != nil {
			t.Fatalf("Run: %v", runErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of its context ending")
	}
	if !ann.closed() {
		t.Error("the announcer was not closed at shutdown")
	}
}

// freeLoopbackPort is a loopback address:port free a moment ago (the
// config refuses port 0; nothing else on this machine binds it meanwhile
// unless by the same coincidence the kernel hands out the port again).
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// closeAnn records VIP sets and whether it was closed.
type closeAnn struct {
	recAnn
	shut bool
}

func (c *closeAnn) Close(bool) error {
	c.recAnn.mu.Lock()
	c.shut = true
	c.recAnn.mu.Unlock()
	return nil
}

func (c *closeAnn) closed() bool {
	c.recAnn.mu.Lock()
	defer c.recAnn.mu.Unlock()
	return c.shut
}
