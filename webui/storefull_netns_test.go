//go:build netns

package webui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/store"
)

const storeFullChild = "EDGELB_STOREFULL_CHILD"

// TestNetnsStoreFull (issue 36): the state directory on a small tmpfs, filled
// by REST writes. The test runs itself again under `unshare -m` (a private
// mount namespace: the tmpfs is seen by that process alone and vanishes with
// it; the machine's disks are never touched) where it mounts a 512 KiB tmpfs
// and PUTs services through the API onto the engine and its bbolt store
// until one is refused. Asserted: the refusal is a 507 naming the reason
// (disk full) and the state file, nothing of it was stored, the metric
// edgelb_store_commit_failures_total{reason="disk_full"} counts it,
// /readyz stays 200 and names it; once space is freed the next write is
// accepted and /readyz is clean again.
func TestNetnsStoreFull(t *testing.T) {
	netns.RequireRoot(t)
	if os.Getenv(storeFullChild) == "" {
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "--", os.Args[0],
			"-test.run=^TestNetnsStoreFull$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), storeFullChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("child (unshare -m):\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNetnsStoreFull") {
			t.Fatalf("child: %v", err)
		}
		return
	}
	storeFull(t)
}

func storeFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "edgelb-test-state", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	// Most of the space goes to a ballast file, so a few dozen writes fill
	// the rest; removing it is "freeing space".
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 320<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenBolt(filepath.Join(dir, "edgelb.db"), store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	eng, err := engine.NewEngine(st, engine.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go eng.Run(ctx)
	s, err := New(Options{Manager: eng, Token: testToken, RateLimit: -1, Gatherer: reg, StoreTrouble: eng.StoreTrouble})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call("POST", "/api/v1/pools", `{"name":"p","addresses":["10.0.0.0/16"]}`); code != 201 {
		t.Fatalf("pool: %d %s", code, body)
	}
	// Each service carries 60 backends (~2 KiB stored).
	var backends []string
	for i := range 60 {
		backends = append(backends, fmt.Sprintf(`{"address":"198.51.100.%d","port":%d}`, i+1, 8000+i))
	}
	svc := func(n int) string {
		return fmt.Sprintf(`{"name":"s%d","pool":"p","ports":[{"port":80}],"backends":[%s]}`, n, strings.Join(backends, ","))
	}
	accepted, code, body := 0, 0, ""
	for n := 0; n < 2000; n++ {
		if code, body = call("PUT", fmt.Sprintf("/api/v1/services/s%d", n), svc(n)); code != 201 {
			break
		}
		accepted++
	}
	t.Logf("MEASURED %d services accepted before the state directory was full; then %d %s", accepted, code, body)
	if code != http.StatusInsufficientStorage || !strings.Contains(body, "disk full") || !strings.Contains(body, "edgelb.db") ||
		!strings.Contains(body, `"value":"disk_full"`) {
		t.Fatalf("write on a full state directory: %d %s", code, body)
	}
	refused := fmt.Sprintf("s%d", accepted)
	if code, _ := call("GET", "/api/v1/services/"+refused, ""); code != 404 {
		t.Errorf("the refused service %s: GET %d, want 404 (nothing stored)", refused, code)
	}
	code, metrics := call("GET", "/metrics", "")
	line := ""
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "edgelb_store_commit_failures_total") {
			line = l
		}
	}
	t.Logf("MEASURED /metrics: %s", line)
	if code != 200 || !strings.HasPrefix(line, `edgelb_store_commit_failures_total{reason="disk_full"} `) ||
		strings.HasSuffix(line, " 0") {
		t.Errorf("/metrics: %d %q", code, line)
	}
	code, ready := call("GET", "/readyz", "")
	t.Logf("MEASURED /readyz: %d %q", code, ready)
	if code != 200 || !strings.Contains(ready, "disk full") {
		t.Errorf("/readyz while full: %d %q", code, ready)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if code, body := call("PUT", "/api/v1/services/"+refused, svc(accepted)); code != 201 {
		t.Fatalf("after freeing space: %d %s", code, body)
	}
	if code, ready := call("GET", "/readyz", ""); code != 200 || ready != "ready\n" {
		t.Errorf("/readyz after freeing space: %d %q", code, ready)
	}
	// The store reopens with everything acknowledged.
	cancel()
	time.Sleep(50 * time.Millisecond)
	st.Close()
	st2, err := store.OpenBolt(filepath.Join(dir, "edgelb.db"), store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	state, err := st2.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Services) != accepted+1 {
		t.Errorf("reopened store holds %d services, want %d", len(state.Services), accepted+1)
	}
}
