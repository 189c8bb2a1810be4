//go:build netns

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// badConfigs are the combinations issue 8 says must be refused, each with
// the field the error must name. This kernel has no IPVS, so "auto" runs
// nftables.
var badConfigs = []struct {
	name  string
	cfg   labConfig
	field string
}{
	{"dr with port mapping", labConfig{Method: "dr", Port: 80, TargetPort: 8080}, "services[0].ports[0].targetPort"},
	{"tunnel on mode nftables", labConfig{Method: "tunnel", Port: 8080, Mode: "nftables"}, "services[0].method"},
	{"tunnel on auto without IPVS", labConfig{Method: "tunnel", Port: 8080}, "services[0].method"},
	{"health check interval 0", labConfig{HealthCheck: `{type: http, path: /, interval: 0s, timeout: 100ms}`}, "services[0].healthCheck.interval"},
	{"health check URL without a host", labConfig{HealthCheck: `{url: "http:///healthz"}`}, "services[0].healthCheck.url"},
}

// TestNetnsRefuseBadCombinations: `edgelb check` exits 1 naming the field,
// and `edgelb run` refuses before programming anything: no nft table, no
// ARP reply for the VIP, in a gateway namespace that stays pristine.
func TestNetnsRefuseBadCombinations(t *testing.T) {
	exe := edgelbBinary(t)
	for _, tc := range badConfigs {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			l := newLab(t, tc.cfg)
			code, out := runIn(t, l.Lab, exe, time.Minute, "check", "--config", l.cfg)
			line := lineWith(out, tc.field)
			t.Logf("edgelb check: exit %d: %s", code, line)
			if code != 1 || line == "" {
				t.Fatalf("edgelb check: exit %d, want 1 naming %s:\n%s", code, tc.field, out)
			}
			code, out = runIn(t, l.Lab, exe, time.Minute, "run", "--config", l.cfg)
			line = lineWith(out, tc.field)
			tables, err := l.Gateway.Exec(context.Background(), "nft", "list", "tables")
			if err != nil {
				t.Fatal(err)
			}
			arp := len(arping(t, l.Lab, VIP, 1))
			t.Logf("edgelb run: exit %d: %s; nft tables in the gateway afterwards: %q; ARP replies for %s: %d",
				code, line, strings.TrimSpace(string(tables)), VIP, arp)
			if code == 0 || line == "" {
				t.Fatalf("edgelb run: exit %d, want a refusal naming %s:\n%s", code, tc.field, out)
			}
			if strings.Contains(string(tables), "edgelb") || arp != 0 {
				t.Fatalf("edgelb run programmed something before refusing")
			}
		})
	}
}

// TestNetnsRefuseBadCombinationsREST: the same combinations through the
// REST API of a running daemon (nftables) answer 400 with the field — 422
// for what is well-formed but beyond the running dataplane — and neither the
// service nor anything in the kernel appears.
func TestNetnsRefuseBadCombinationsREST(t *testing.T) {
	l := startIssue8Lab(t, labConfig{})
	be := `"backends":[{"address":"198.51.100.11"}]`
	cases := []struct {
		name, body, field string
		status            int
	}{
		{"dr with port mapping", `{"name":"bad","method":"dr","ports":[{"port":80,"targetPort":8080}],` + be + `}`, "ports[0].targetPort", 400},
		{"tunnel on nftables", `{"name":"bad","method":"tunnel","ports":[{"port":8080}],` + be + `}`, "method", 422},
		{"lc on nftables", `{"name":"bad","scheduler":"lc","ports":[{"port":8080}],` + be + `}`, "scheduler", 422},
		{"health check interval 0", `{"name":"bad","ports":[{"port":81,"targetPort":8080}],` + be +
			`,"healthCheck":{"type":"http","path":"/","interval":"0s","timeout":"100ms","rise":2,"fall":3}}`, "healthCheck.interval", 400},
		{"health check URL without a host", `{"name":"bad","ports":[{"port":81,"targetPort":8080}],` + be +
			`,"healthCheck":{"type":"http","path":"http:///healthz","interval":"1s","timeout":"100ms","rise":2,"fall":3}}`, "healthCheck.path", 400},
	}
	before := ruleset(t, l)
	for _, tc := range cases {
		code, body := l.do(t, "PUT", "/api/v1/services/bad", tc.body)
		var e struct {
			Field string `json:"field"`
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		t.Logf("%s: PUT → %d field=%q: %s", tc.name, code, e.Field, e.Error)
		if code != tc.status || e.Field != tc.field {
			t.Errorf("%s: got %d %s, want %d with field %q", tc.name, code, body, tc.status, tc.field)
		}
		if code, _ := l.do(t, "GET", "/api/v1/services/bad", ""); code != 404 {
			t.Errorf("%s: the refused service exists (GET %d)", tc.name, code)
		}
	}
	time.Sleep(500 * time.Millisecond) // a (wrongly) accepted change would have reached the kernel by now
	if after := ruleset(t, l); after != before {
		t.Fatalf("the gateway's ruleset changed after refused requests:\n--- before\n%s\n--- after\n%s", before, after)
	}
	t.Logf("gateway ruleset unchanged after %d refused PUTs", len(cases))
}

func ruleset(t *testing.T, l *issue8Lab) string {
	t.Helper()
	out, err := l.Gateway.Exec(context.Background(), "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// runIn runs the edgelb binary inside the lab's gateway namespace and
// returns its exit code and combined output.
func runIn(t *testing.T, l *Lab, exe string, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	err := l.Gateway.Do(cmd.Start)
	if err == nil {
		err = cmd.Wait()
	}
	if ctx.Err() != nil {
		t.Fatalf("edgelb %s did not finish within %s (it should refuse at once; the bound is for a hang, so a busy machine cannot break it):\n%s", args[0], timeout, out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatal(err)
	return 0, ""
}

// lineWith returns the last line of out containing s (the final error
// rather than an earlier log line).
func lineWith(out, s string) string {
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			last = strings.TrimSpace(l)
		}
	}
	return last
}
