//go:build netns

package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/edgelbbin"
	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsCheckOwnAddress (issue 36): `edgelb check` gives the verdict
// `edgelb run` would give on this host. A pool holding, or a backend being,
// an address of one of the host's interfaces (here 198.51.100.77 on lo of a
// fresh namespace) makes run refuse to start; check, reading the same
// interfaces, fails with the field and the interface named. (A VIP lies in
// a pool, so an own VIP is the pool case.) `check
// --no-host` reads only the file, so it cannot know and passes.
func TestNetnsCheckOwnAddress(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbbin.Path(t)
	ns := netns.NewT(t, "elco-")
	if err := ns.LinkUp("lo"); err != nil {
		t.Fatal(err)
	}
	const own = "198.51.100.77"
	if err := ns.AddAddr("lo", netip.MustParsePrefix(own+"/32")); err != nil {
		t.Fatal(err)
	}
	svc := func(vip, backend string) string {
		return fmt.Sprintf("services:\n  - {name: web, vip: %s, ports: [{port: 80}], backends: [{address: %q}]}\n", vip, backend)
	}
	for _, tc := range []struct{ name, yaml, field string }{
		{"pool", "pools: [{name: p, addresses: [\"198.51.100.64/26\"]}]\n", `addresses[0] "198.51.100.64/26"`},
		{"backend", "pools: [{name: p, addresses: [\"198.51.100.0/27\"]}]\n" + svc("198.51.100.10", own), `backends[0].address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.yaml")
			body := fmt.Sprintf("%sdataplane: {mode: nftables}\nstate: {dir: %s}\napi: {listen: \"127.0.0.1:18080\"}\n", tc.yaml, filepath.Join(dir, "state"))
			if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			why := own + ", this gateway's own address (interface lo)"
			if tc.name != "pool" {
				why = own + " is this gateway's own address (interface lo)"
			}

			out, err := ns.Exec(ctx, exe, "check", "--config", cfg)
			t.Logf("edgelb check:\n%s", out)
			if err == nil || !strings.Contains(string(out), "edgelb run would refuse this config here") ||
				!strings.Contains(string(out), tc.field) || !strings.Contains(string(out), why) {
				t.Errorf("check: %v; want a failure naming %s and %q", err, tc.field, why)
			}

			out, err = ns.Exec(ctx, exe, "check", "--no-host", "--config", cfg)
			if err != nil {
				t.Errorf("check --no-host reads only the file and must pass: %v\n%s", err, out)
			}

			// The same config under run: refused at start, for the same reason.
			out, err = ns.Exec(ctx, exe, "run", "--config", cfg)
			t.Logf("edgelb run: %v\n%s", err, lastLines(string(out), 5))
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), why) {
				t.Errorf("run: %v; want it to refuse to start naming %q", err, why)
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
