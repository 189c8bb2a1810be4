//go:build netns

package main

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestNetnsUnitExposure runs Debian's systemd-analyze, offline, on the
// shipped unit: the hardening must keep the exposure score at or below 2.5.
// (Tagged netns because that target installs systemd and runs as root.)
func TestNetnsUnitExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed")
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "../../systemd/edgelb.service").CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for edgelb.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in the output (err %v):\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=yes systemd/edgelb.service: exposure %.1f", score)
	if score > 2.5 {
		t.Fatalf("exposure %.1f > 2.5", score)
	}
}
