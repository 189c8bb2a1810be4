package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func runCheck(t *testing.T, yaml string, extra ...string) (int, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := realMain(append([]string{"check", "--config", p}, extra...), &out, &errb)
	return code, out.String() + errb.String()
}

func TestCheckOverlappingPoolsQuotesBoth(t *testing.T) {
	code, out := runCheck(t, `
pools:
  - name: a
    addresses: ["192.0.2.0/25"]
  - name: b
    addresses: ["192.0.2.100-192.0.2.200"]
`, "--no-host")
	t.Log(out)
	if code != 1 || !strings.Contains(out, `"192.0.2.0/25"`) || !strings.Contains(out, `"192.0.2.100-192.0.2.200"`) {
		t.Fatalf("exit %d, output must quote both ranges:\n%s", code, out)
	}
}

func TestCheckValid(t *testing.T) {
	code, out := runCheck(t, `
pools:
  - name: a
    addresses: ["192.0.2.0/25"]
`, "--no-host")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestCheckRefusesSchedulerNftablesCannotDo(t *testing.T) {
	code, out := runCheck(t, `
pools:
  - name: a
    addresses: ["192.0.2.0/25"]
services:
  - name: web
    scheduler: wlc
    ports: [{port: 80}]
    backends: [{address: "198.51.100.2:80"}]
dataplane: {mode: nftables}
`)
	t.Log(out)
	if code != 1 || !strings.Contains(out, `services[0].scheduler "wlc"`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestHelpEverywhere: `--help` on every command and verb exits 0 and shows
// that command's own usage line (before cobra, `pools apply --help`
// printed "Usage: edgelb pools apply get [NAME...]").
func TestHelpEverywhere(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			path := strings.Fields(sub.CommandPath())[1:]
			want := "Usage:\n  " + sub.CommandPath() + strings.TrimPrefix(sub.Use, sub.Name())
			if sub.HasAvailableSubCommands() {
				want = "Usage:\n  " + sub.CommandPath() + " [command]\n"
			}
			var out, errb bytes.Buffer
			if code := realMain(append(path, "--help"), &out, &errb); code != 0 || !strings.Contains(out.String(), want) {
				t.Errorf("%s --help: exit %d, want %q in\n%s", sub.CommandPath(), code, want, out.String())
			}
			n++
			walk(sub)
		}
	}
	walk(newRoot())
	if n < 19 { // the 19 of today: the demo moved out to lab/demo/cmd/edgelb-demo
		t.Fatalf("only %d commands", n)
	}
	var out, errb bytes.Buffer
	realMain([]string{"pools", "apply", "--help"}, &out, &errb)
	if !strings.Contains(out.String(), "Usage:\n  edgelb pools apply -f FILE [flags]\n") || strings.Contains(out.String(), "get") {
		t.Errorf("pools apply --help:\n%s", out.String())
	}
	t.Logf("%d commands, pools apply --help:\n%s", n, out.String())
}

// TestReadmeConfigIsValid keeps the README's example honest.
func TestReadmeConfigIsValid(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "### A minimal config\n\n```yaml\n")
	if i < 0 {
		t.Fatal("README has no minimal config block")
	}
	s = s[i+len("### A minimal config\n\n```yaml\n"):]
	s = s[:strings.Index(s, "```")]
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("secret"), 0o600)
	code, out := runCheck(t, strings.ReplaceAll(s, "/etc/edgelb/ops.token", tok), "--no-host")
	if code != 0 {
		t.Fatalf("README config: exit %d\n%s", code, out)
	}
}

// TestCheckReportsUnmetRequests (issue 13): a config the daemon would
// start with a service left pending is reported, with the service and why.
func TestCheckReportsUnmetRequests(t *testing.T) {
	code, out := runCheck(t, `
pools:
  - name: p
    addresses: ["192.0.2.100-192.0.2.101"]
services:
  - {name: a, pool: p, vip: 192.0.2.100, ports: [{port: 80}], backends: [{address: "198.51.100.1:80"}]}
  - {name: c, pool: p, ports: [{port: 80}], backends: [{address: "198.51.100.3:80"}]}
  - {name: d, pool: p, ports: [{port: 80}], backends: [{address: "198.51.100.3:80"}]}
`, "--no-host")
	t.Log(out)
	if code != 1 || !strings.Contains(out, `1 service(s) would get no address`) || !strings.Contains(out, `services "d": allocate an IPv4 address for service "d" from pool "p"`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The requester keeps its address whatever the names: "a" is met, and
	// with the request named last it still is.
	code, out = runCheck(t, `
pools:
  - name: p
    addresses: ["192.0.2.100-192.0.2.101"]
services:
  - {name: a, pool: p, ports: [{port: 80}], backends: [{address: "198.51.100.1:80"}]}
  - {name: b, pool: p, ports: [{port: 80}], backends: [{address: "198.51.100.1:80"}]}
  - {name: z, pool: p, vip: 192.0.2.100, ports: [{port: 80}], backends: [{address: "198.51.100.3:80"}]}
`, "--no-host")
	if code != 1 || strings.Contains(out, `services "z"`) || !strings.Contains(out, `services "b"`) {
		t.Fatalf("exit %d, want only the automatic b unmet:\n%s", code, out)
	}
}
