//go:build system

package system

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func debs(t *testing.T) (cur, old string) {
	t.Helper()
	cur, old = os.Getenv("EDGELB_DEB"), os.Getenv("EDGELB_OLD_DEB")
	if cur == "" {
		t.Fatal("EDGELB_DEB (make deb's package) not set: run make test-system")
	}
	return cur, old
}

// TestSystemInstall: one gateway booted, the package installed, the unit
// enabled and started by systemd; ready by sd_notify, traffic through the
// VIP, structured lines in the journal, and a reload that adds a service
// while a connection stays open.
func TestSystemInstall(t *testing.T) {
	deb, _ := debs(t)
	l := newLab(t, 1)
	g := l.gws[0]
	g.boot()
	boot := g.booted

	if out, err := g.install(deb); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("dpkg -i: %s", lastLines(out, 3))
	}
	if st, _ := g.run("systemctl", "is-enabled", "edgelb"); strings.TrimSpace(st) != "disabled" {
		t.Fatalf("after install the unit is %q, want disabled (an unconfigured gateway must not start)", strings.TrimSpace(st))
	}
	web := svc{name: "web", vip: "192.0.2.100"}
	g.writeFile("/etc/edgelb/config.yaml", []byte(config(1, false, web)), 0o644)
	g.must("edgelb", "check", "--config", "/etc/edgelb/config.yaml")

	// Type=notify: `enable --now` returns once READY=1 arrived.
	t0 := time.Now()
	g.must("systemctl", "enable", "--now", "edgelb")
	ready := time.Since(t0)
	if st, _ := g.run("systemctl", "is-active", "edgelb"); strings.TrimSpace(st) != "active" {
		t.Fatalf("edgelb is %q after enable --now: %s", strings.TrimSpace(st), g.statusText())
	}
	pid := g.mainPID()

	// The journal: journald's own fields, and edgelb's JSON line as MESSAGE.
	var readyLine map[string]any
	if !waitFor(10*time.Second, func() bool {
		for _, e := range g.journal() {
			if m := message(e); m["msg"] == "dataplane converged; ready" {
				readyLine = e
				return true
			}
		}
		return false
	}) {
		raw, err := g.run("journalctl", "-b", "-u", "edgelb", "-o", "json", "--no-pager", "-n", "3")
		t.Fatalf("no \"dataplane converged; ready\" line in journalctl -u edgelb -o json (%v): %.2000s", err, raw)
	}
	for _, f := range []string{"_SYSTEMD_UNIT", "_PID", "SYSLOG_IDENTIFIER", "PRIORITY", "_SYSTEMD_INVOCATION_ID"} {
		if readyLine[f] == nil {
			t.Errorf("journal entry without %s: %v", f, readyLine)
		}
	}
	if readyLine["_SYSTEMD_UNIT"] != "edgelb.service" || readyLine["SYSLOG_IDENTIFIER"] != "edgelb" {
		t.Errorf("journal entry of %v / %v, want edgelb.service / edgelb", readyLine["_SYSTEMD_UNIT"], readyLine["SYSLOG_IDENTIFIER"])
	}
	m := message(readyLine)
	if m["dataplane"] != "nftables" || m["level"] != "INFO" || m["time"] == nil {
		t.Errorf("ready line's fields: %v", m)
	}
	t.Logf("journal: ready line %v, journald fields _SYSTEMD_UNIT=%v SYSLOG_IDENTIFIER=%v PRIORITY=%v _PID=%v",
		readyLine["MESSAGE"], readyLine["_SYSTEMD_UNIT"], readyLine["SYSLOG_IDENTIFIER"], readyLine["PRIORITY"], readyLine["_PID"])
	t.Logf("MEASURED system boot_s=%.2f ready_s=%.2f", boot.Seconds(), ready.Seconds())

	hc := l.client.HTTPClient(5 * time.Second)
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://192.0.2.100/") == nil }) {
		t.Fatalf("no answer through the VIP 192.0.2.100: %v; %s", get(hc, "http://192.0.2.100/"), g.statusText())
	}
	fw, _ := g.run("sysctl", "-n", "net.ipv4.ip_forward")
	t.Logf("forwarding through the VIP; net.ipv4.ip_forward=%s in the gateway", strings.TrimSpace(fw))

	// Reload with one more service, a stream open through the first.
	tr := startTraffic(t, l.client, "192.0.2.100", 5, 5)
	defer tr.finish()
	g.writeFile("/etc/edgelb/config.yaml", []byte(config(1, false, web, svc{name: "web2", vip: "192.0.2.101"})), 0o644)
	reloadAt := time.Now()
	g.must("systemctl", "reload", "edgelb")
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://192.0.2.101/") == nil }) {
		t.Fatalf("the reloaded service 192.0.2.101 does not answer: %v; %s", get(hc, "http://192.0.2.101/"), g.statusText())
	}
	time.Sleep(time.Second)
	if p := g.mainPID(); p != pid {
		t.Errorf("reload restarted the daemon (MainPID %s → %s)", pid, p)
	}
	if k := tr.kept(reloadAt.Add(500 * time.Millisecond)); k != len(tr.streams) {
		t.Errorf("reload dropped streams: %d/%d kept", k, len(tr.streams))
	}
	req, failed, errs := tr.counts()
	if failed > 0 {
		t.Errorf("%d/%d requests failed across the reload: %v", failed, req, errs)
	}
	t.Logf("reload: web2 answers; MainPID %s unchanged; streams kept %d/%d; requests %d failed %d", pid, tr.kept(reloadAt), len(tr.streams), req, failed)

	out, _ := g.run("systemd-analyze", "security", "edgelb.service", "--no-pager")
	t.Logf("systemd-analyze security edgelb.service: %s", exposure(out))
}

var exposureRE = regexp.MustCompile(`Overall exposure level for edgelb.service: .*`)

func exposure(out string) string {
	if m := exposureRE.FindString(out); m != "" {
		return m
	}
	return lastLines(out, 3)
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// message is an entry's MESSAGE parsed as edgelb's log line: JSON
// (log.format json) or slog's text (key=value, values quoted when they need
// it; an edgelb before the config's log.format was applied writes text).
// Nil when it is neither.
func message(e map[string]any) map[string]any {
	s, _ := e["MESSAGE"].(string)
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) == nil {
		return m
	}
	if !strings.HasPrefix(s, "time=") {
		return nil
	}
	m = map[string]any{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		m[k] = v
		s = strings.TrimLeft(rest, " ")
	}
	return m
}

func (g *gateway) mainPID() string {
	out, _ := g.run("systemctl", "show", "-P", "MainPID", "edgelb")
	return strings.TrimSpace(out)
}

// statusText is systemctl status and the journal's tail, for failures.
func (g *gateway) statusText() string {
	st, _ := g.run("systemctl", "status", "edgelb", "--no-pager", "-l", "-n", "0")
	j, _ := g.run("journalctl", "-b", "-u", "edgelb", "--no-pager", "-n", "30", "-o", "cat")
	return st + "\n" + j
}
