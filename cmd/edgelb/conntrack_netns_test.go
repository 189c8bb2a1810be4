//go:build netns

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/edgelbbin"
	"github.com/edgelb/edgelb/lab/netns"
)

func TestMain(m *testing.M) { edgelbbin.Main(m) }

// TestNetnsCheckConntrackSizing (issue 36): `edgelb check`, the real binary
// in a fresh namespace, against the kernel's own nf_conntrack_max: a
// configured peak the table cannot hold twice is a WARN whose fix sets twice
// the peak (and writes the sysctl.d file); a peak it can hold is INFO with
// the fill at the peak. A warning does not fail the check (exit 0).
func TestNetnsCheckConntrackSizing(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbbin.Path(t)
	ns := netns.NewT(t, "elct-")
	v, err := ns.ReadSysctl("net.netfilter.nf_conntrack_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || max < 8 {
		t.Fatalf("nf_conntrack_max %q: %v", v, err)
	}
	run := func(peak uint64) (string, error) {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		body := fmt.Sprintf("pools:\n  - name: a\n    addresses: [\"192.0.2.0/25\"]\ndataplane:\n  mode: nftables\n  conntrackPeak: %d\n", peak)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := ns.Exec(ctx, exe, "check", "--config", cfg)
		return string(out), err
	}

	peak := max + 1000 // the table is below the peak itself
	out, err := run(peak)
	t.Logf("nf_conntrack_max %d, dataplane.conntrackPeak %d: edgelb check:\n%s", max, peak, out)
	if err != nil {
		t.Fatalf("a conntrack warning must not fail the check: %v", err)
	}
	for _, want := range []string{
		"WARN conntrack-max-small",
		fmt.Sprintf("net.netfilter.nf_conntrack_max = %d is below 2× the peak of %d connections (dataplane.conntrackPeak)", max, peak),
		fmt.Sprintf("sysctl -w net.netfilter.nf_conntrack_max=%d", 2*peak),
		fmt.Sprintf("echo 'net.netfilter.nf_conntrack_max = %d' > /etc/sysctl.d/99-edgelb-conntrack.conf", 2*peak),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}

	out, err = run(max / 4)
	t.Logf("dataplane.conntrackPeak %d: edgelb check:\n%s", max/4, out)
	if err != nil || !strings.Contains(out, "conntrack-ok") || strings.Contains(out, "conntrack-max-small") {
		t.Errorf("a peak of max/4 must be conntrack-ok (err %v)", err)
	}
}
