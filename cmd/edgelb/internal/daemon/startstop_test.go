package daemon

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	annfake "github.com/edgelb/edgelb/announce/fake"
	"github.com/edgelb/edgelb/proxy/fake"
)

// TestRunStopsWhileWaitingForEtcd (issue 35): a fleet gateway whose etcd
// does not answer waits for it at start; SIGTERM meanwhile (Run's context
// ending) stops it at once and cleanly (nil), instead of after the 60 s
// start timeout.
func TestRunStopsWhileWaitingForEtcd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	etcd := ln.Addr().String()
	ln.Close() // nothing listens there: etcd never answers
	dir := t.TempDir()
	cfg := `pools:
  - name: p
    addresses: ["192.0.2.0/28"]
dataplane:
  nodeAddresses: ["203.0.113.1"]
api:
  listen: ` + freeLoopbackPort(t) + `
state:
  type: etcd
  endpoints: ["http://` + etcd + `"]
  gateway: gw0
  dir: ` + filepath.Join(dir, "state") + "\n"
	path := filepath.Join(dir, "edgelb.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Dataplane: fake.New(fake.NFTablesOptions), Announcers: []announce.Announcer{&annfake.Announcer{}}})
	}()
	time.Sleep(time.Second) // well into the wait for etcd
	select {
	case err := <-done:
		t.Fatalf("Run returned before its context ended: %v", err)
	default:
	}
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after SIGTERM during start-up: %v, want nil (a clean stop)", err)
		}
		t.Logf("MEASURED run-start-sigterm returned_after_ms=%d", time.Since(t0).Milliseconds())
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waiting for etcd 30 s after its context ended (the start timeout is 60 s)")
	}
}
