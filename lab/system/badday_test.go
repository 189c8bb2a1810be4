//go:build system

package system

import (
	"strings"
	"testing"
	"time"
)

// TestSystemBadDay: an upgrade onto a config the new edgelb refuses, a
// restart with it, restart storms against the unit's start limit, and the
// package removed and purged.
func TestSystemBadDay(t *testing.T) {
	deb, old := debs(t)
	if old == "" {
		t.Fatal("EDGELB_OLD_DEB (lab/system/olddeb.sh's package) not set: run make test-system")
	}
	l := newLab(t, 1)
	g := l.gws[0]
	g.boot()
	if _, err := g.install(old); err != nil {
		t.Fatal(err)
	}
	web := svc{name: "web", vip: "192.0.2.100"}
	good := config(1, false, web)
	g.writeFile("/etc/edgelb/config.yaml", []byte(good), 0o644)
	g.must("systemctl", "enable", "--now", "edgelb")
	hc := l.client.HTTPClient(5 * time.Second)
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://192.0.2.100/") == nil }) {
		t.Fatalf("no answer through the VIP: %s", g.statusText())
	}
	pid := g.mainPID()

	// 1. The upgrade meets a broken config: dpkg fails the configuration
	// and says why; the running gateway keeps serving.
	broken := strings.Replace(good, "vip: 192.0.2.100", "vip: 192.0.2.300", 1)
	g.writeFile("/etc/edgelb/config.yaml", []byte(broken), 0o644)
	out, err := g.install(deb)
	if err == nil {
		t.Fatalf("dpkg -i accepted the upgrade onto a broken config: %s", out)
	}
	if !strings.Contains(out, `"192.0.2.300"`) {
		t.Errorf("dpkg's output does not quote the bad value: %s", out)
	}
	st, _ := g.run("dpkg-query", "-W", "-f", "${Status}", "edgelb")
	t.Logf("dpkg -i onto a broken config: %v; status %q; output: %s", err, st, lastLines(out, 6))
	if !strings.Contains(st, "half-configured") {
		t.Errorf("package status %q, want half-configured", st)
	}
	if p := g.mainPID(); p != pid || get(hc, "http://192.0.2.100/") != nil {
		t.Errorf("the running gateway did not keep serving (MainPID %s → %s, GET %v)", pid, p, get(hc, "http://192.0.2.100/"))
	}

	// 2. Restarted with it anyway: the unit fails with the config error in
	// the journal, and Restart=on-failure stops at the start limit.
	g.run("systemctl", "restart", "edgelb")
	if !waitFor(60*time.Second, func() bool {
		s, _ := g.run("systemctl", "show", "-P", "ActiveState", "edgelb")
		return strings.TrimSpace(s) == "failed"
	}) {
		t.Fatalf("the unit with a broken config did not end failed: %s", g.statusText())
	}
	res, _ := g.run("systemctl", "show", "-P", "Result", "edgelb")
	nr, _ := g.run("systemctl", "show", "-P", "NRestarts", "edgelb")
	j, _ := g.run("journalctl", "-b", "-u", "edgelb", "--no-pager", "-o", "cat")
	if !strings.Contains(j, `"192.0.2.300"`) {
		t.Errorf("the journal does not quote the bad value: %s", lastLines(j, 10))
	}
	prio := ""
	for _, e := range g.journal() {
		if m, _ := e["MESSAGE"].(string); strings.Contains(m, `"192.0.2.300"`) {
			prio, _ = e["PRIORITY"].(string)
		}
	}
	if prio != "3" {
		t.Errorf("the config error is in the journal at PRIORITY=%q, want 3 (err)", prio)
	}
	t.Logf("restart with a broken config: Result=%s NRestarts=%s; journal (PRIORITY=%s): %s", strings.TrimSpace(res), strings.TrimSpace(nr), prio, lastLines(grepLines(j, "192.0.2.300"), 2))

	// 3. Fixed: the configuration completes; the failed unit is started by
	// the operator (try-restart leaves a stopped gateway stopped).
	g.writeFile("/etc/edgelb/config.yaml", []byte(good), 0o644)
	g.must("dpkg", "--configure", "-a")
	g.must("systemctl", "reset-failed", "edgelb")
	g.must("systemctl", "start", "edgelb")
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://192.0.2.100/") == nil }) {
		t.Fatalf("no answer after the fix: %s", g.statusText())
	}

	// 4. A restart storm: systemd refuses starts beyond the unit's limit
	// (StartLimitBurst in StartLimitIntervalSec); reset-failed clears it.
	burst, _ := g.run("systemctl", "show", "-P", "StartLimitBurst", "edgelb")
	interval, _ := g.run("systemctl", "show", "-P", "StartLimitIntervalUSec", "edgelb")
	ok, refused := 0, 0
	for k := 0; k < 10; k++ {
		if _, err := g.run("systemctl", "restart", "edgelb"); err != nil {
			refused++
		} else {
			ok++
		}
	}
	t.Logf("restart storm: 10 restarts, %d done, %d refused (StartLimitBurst=%s in %s)", ok, refused, strings.TrimSpace(burst), strings.TrimSpace(interval))
	if refused == 0 {
		t.Errorf("10 restarts in a row all ran: no start limit")
	}
	g.must("systemctl", "reset-failed", "edgelb")
	g.must("systemctl", "start", "edgelb")
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://192.0.2.100/") == nil }) {
		t.Fatalf("no answer after the storm: %s", g.statusText())
	}
	if rs := g.must("nft", "list", "tables"); strings.Count(rs, "edgelb") == 0 {
		t.Errorf("no edgelb table while serving: %s", rs)
	}

	// 5. apt remove stops the gateway and its ExecStopPost cleans the
	// kernel; purge takes the state and the config.
	g.must("apt-get", "remove", "-y", "edgelb")
	if rs := g.must("nft", "list", "ruleset"); strings.Contains(rs, "edgelb") {
		t.Errorf("nftables after apt remove still hold edgelb's objects: %s", rs)
	}
	g.must("apt-get", "purge", "-y", "edgelb")
	if rs := g.must("nft", "list", "ruleset"); strings.TrimSpace(rs) != "" {
		t.Errorf("nftables after apt purge: %s", rs)
	}
	if left, _ := g.sh("ls -d /etc/edgelb /var/lib/private/edgelb /var/lib/edgelb 2>/dev/null || true"); strings.TrimSpace(left) != "" {
		t.Errorf("left after purge: %s", left)
	}
	t.Logf("apt remove, purge: nftables empty, state and config gone")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
