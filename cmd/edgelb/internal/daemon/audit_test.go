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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	annfake "github.com/edgelb/edgelb/announce/fake"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/proxy/fake"
	"github.com/edgelb/edgelb/webui"
)

// TestRunAuditTrail (issue 36): the audit trail through the whole daemon.
// A REST write with the token named "ops", a SIGHUP reload that adds a
// service and a restart: GET /api/v1/audit (with the read token named
// "grafana") then lists the start-up's config objects, the REST create
// with its identity and client address, the reload's create, in order and
// with increasing sequence numbers — the entries outlived the restart.
// A read token cannot write (403), and its name shows nowhere in the trail.
func TestRunAuditTrail(t *testing.T) {
	dir := t.TempDir()
	api := freeLoopbackPort(t)
	for name, v := range map[string]string{"ops.token": "ops-secret\n", "grafana.token": "grafana-secret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "edgelb.yaml")
	writeCfg := func(services string) {
		t.Helper()
		cfg := `pools:
  - name: p
    addresses: ["192.0.2.0/28"]
services:
  - name: web
    pool: p
    ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080}]
    backends: [{address: "198.51.100.2"}]
` + services + `dataplane:
  nodeAddresses: ["203.0.113.1"]
api:
  listen: ` + api + `
  tokens:
    - {name: ops, file: ops.token, role: write}
    - {name: grafana, file: grafana.token, role: read}
state:
  dir: ` + filepath.Join(dir, "state") + "\n"
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg("")
	start := func() (stop func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var runErr error
		go func() {
			defer close(done)
			runErr = Run(ctx, Options{ConfigPath: cfgPath, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Dataplane: fake.New(fake.NFTablesOptions), Announcers: []announce.Announcer{&annfake.Announcer{}}})
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
		// 60 ms between polls: under the API's 20 requests a second.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(60 * time.Millisecond) {
			if resp, err := http.Get("http://" + api + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return stop
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("not ready within 30 s")
			}
		}
	}
	call := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+api+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	entries := func() []audit.Entry {
		t.Helper()
		code, body := call("GET", "/api/v1/audit?limit=1000", "grafana-secret", "")
		if code != 200 {
			t.Fatalf("GET /api/v1/audit: %d %s", code, body)
		}
		var l webui.AuditList
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		return l.Entries
	}

	stop := start()
	const svc = `{"name":"api1","pool":"p","ports":[{"port":443}],"backends":[{"address":"198.51.100.3"}]}`
	if code, body := call("PUT", "/api/v1/services/api1", "grafana-secret", svc); code != 403 {
		t.Fatalf("read token writes: %d %s", code, body)
	}
	if code, body := call("PUT", "/api/v1/services/api1", "ops-secret", svc); code != 201 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body := call("PUT", "/api/v1/services/api1", "ops-secret", strings.Replace(svc, ".3", ".9", 1)); code != 200 {
		t.Fatalf("PUT again: %d %s", code, body)
	}
	writeCfg(`  - name: added
    pool: p
    ports: [{name: dns, port: 53, protocol: UDP}]
    backends: [{address: "198.51.100.4"}]
`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if es := entries(); len(es) > 0 && es[0].Source == "reload" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload entry within 30 s: %+v", entries())
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stop = start()
	defer stop()
	got := entries()
	for i := len(got) - 1; i >= 0; i-- {
		b, _ := json.Marshal(got[i])
		t.Logf("AUDIT %s", b)
	}
	type key struct{ identity, source, client, object, action string }
	var keys []key
	for i := len(got) - 1; i >= 0; i-- {
		e := got[i]
		keys = append(keys, key{e.Identity, e.Source, e.Client, e.Object, e.Action})
		if i < len(got)-1 && e.Seq <= got[i+1].Seq || e.Time.IsZero() {
			t.Errorf("entry %d: seq %d after %d, time %v", i, e.Seq, got[i+1].Seq, e.Time)
		}
	}
	want := []key{
		{"start-up", "start-up", "", "pool/p", "create"},
		{"start-up", "start-up", "", "service/web", "create"},
		{"ops", "rest", "127.0.0.1", "service/api1", "create"},
		{"ops", "rest", "127.0.0.1", "service/api1", "update"},
		{"SIGHUP", "reload", "", "service/added", "create"},
	}
	if len(keys) != len(want) {
		t.Fatalf("entries %+v, want %+v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, keys[i], want[i])
		}
	}
	if e := got[len(got)-3]; !strings.Contains(e.After, "backends=[198.51.100.3*1]") || e.Before != "" {
		t.Errorf("REST create's summary: before %q after %q", e.Before, e.After)
	}
	if e := got[len(got)-4]; !strings.Contains(e.Before, "backends=[198.51.100.3*1]") || !strings.Contains(e.After, "backends=[198.51.100.9*1]") {
		t.Errorf("REST update's summary: before %q after %q", e.Before, e.After)
	}
}
