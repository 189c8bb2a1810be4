package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb/migrate/metallb"
)

// TestMigrateMetalLBPassesCheck: every MetalLB example together converts
// to a config `edgelb check --no-host` accepts (exit 0), and the report
// names each unsupported field.
func TestMigrateMetalLBPassesCheck(t *testing.T) {
	files, _ := filepath.Glob("../../lb/migrate/metallb/testdata/*.yaml")
	if len(files) == 0 {
		t.Fatal("no MetalLB examples")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bgp-far.password"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.txt")
	args := []string{"migrate", "metallb", "--l2-interface", "eth0", "--secret-dir", dir, "--report", report}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	// The examples carry a Namespace: refused unless asked to skip it.
	if _, err := run(t, args...); !errors.Is(err, metallb.ErrUnknown) {
		t.Fatalf("a Namespace among the documents without --skip-unknown: err %v, want ErrUnknown", err)
	}
	out, err := run(t, append(args, "--skip-unknown")...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "edgelb.yaml")
	// The state directory must be writable for check's store look-up.
	if err := os.WriteFile(cfg, []byte(out+"state:\n  dir: "+filepath.Join(dir, "state")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if chk, err := run(t, "check", "--no-host", "--config", cfg); err != nil {
		t.Fatalf("edgelb check refused the migrated config: %v\n%s\n%s", err, chk, out)
	}
	// The BFDProfile is carried onto the peer that names it.
	if !strings.Contains(out, "bfd:") || !strings.Contains(out, "receiveInterval: 380ms") {
		t.Errorf("BFDProfile not carried:\n%s", out)
	}
	rep, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"NOTE IPAddressPool/ns-pool", "spec.serviceAllocation: namespaces and selectors are kept",
		"BFDProfile/full (../../lb/migrate/metallb/testdata/bgp.yaml:38) spec.echoMode", "spec.nodeSelectors", "announcement: no L2Advertisement or BGPAdvertisement selects", "SKIPPED"} {
		if !strings.Contains(string(rep), f) {
			t.Errorf("report does not name %s:\n%s", f, rep)
		}
	}
}

// TestMigrateKeepalivedPassesCheck: the NAT/DR/TUN conf converts to a
// config `edgelb check --no-host` accepts, and the report names the
// keywords without an equivalent.
func TestMigrateKeepalivedPassesCheck(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.txt")
	out, err := run(t, "migrate", "keepalived", "-f", "../../lb/migrate/keepalived/testdata/lvs.conf", "--report", report)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "edgelb.yaml")
	if err := os.WriteFile(cfg, []byte(out+"state:\n  dir: "+filepath.Join(dir, "state")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if chk, err := run(t, "check", "--no-host", "--config", cfg); err != nil {
		t.Fatalf("edgelb check refused the migrated config: %v\n%s\n%s", err, chk, out)
	}
	rep, _ := os.ReadFile(report)
	for _, kw := range []string{"sorry_server", "include", "authentication", "4 services"} {
		if !strings.Contains(string(rep), kw) {
			t.Errorf("report does not name %s:\n%s", kw, rep)
		}
	}
}
