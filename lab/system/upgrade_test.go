//go:build system

package system

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// pair is a running 2-gateway L2 pair with state sync, one service web
// whose VIP comes from the pool (an assignment in each gateway's store).
type pair struct {
	*lab
	vip string
}

// startPair boots both gateways, installs deb, configures and starts them,
// and waits for one owner of the VIP and an answer through it.
func startPair(t *testing.T, deb string) *pair {
	t.Helper()
	l := newLab(t, 2)
	for _, g := range l.gws {
		g.boot()
	}
	for _, g := range l.gws {
		if out, err := g.install(deb); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("%s: dpkg -i %s", g.name, lastLines(out, 1))
		}
		g.writeFile("/etc/edgelb/config.yaml", []byte(config(g.i, true, svc{name: "web"})), 0o644)
	}
	for _, g := range l.gws {
		g.must("systemctl", "enable", "--now", "edgelb")
	}
	p := &pair{lab: l}
	for _, g := range l.gws {
		vip, err := g.assigned("web")
		if err != nil {
			t.Fatal(err)
		}
		if p.vip != "" && vip != p.vip {
			t.Fatalf("the gateways assigned web different VIPs: %s and %s", p.vip, vip)
		}
		p.vip = vip
	}
	if p.steadyOwner(30*time.Second) == nil {
		t.Fatalf("no single owner of %s in 30 s:\n%s\n%s", p.vip, l.gws[0].statusText(), l.gws[1].statusText())
	}
	hc := l.client.HTTPClient(5 * time.Second)
	if !waitFor(20*time.Second, func() bool { return get(hc, "http://"+p.vip+"/") == nil }) {
		t.Fatalf("no answer through %s: %v", p.vip, get(hc, "http://"+p.vip+"/"))
	}
	return p
}

// assigned is the VIP the gateway's store holds for a service.
func (g *gateway) assigned(name string) (string, error) {
	var s struct {
		Assigned []string `json:"assigned"`
	}
	if err := g.api("/services/"+name, &s); err != nil {
		return "", err
	}
	if len(s.Assigned) == 0 {
		return "", fmt.Errorf("%s: service %s has no VIP", g.name, name)
	}
	return strings.Join(s.Assigned, ","), nil
}

// owns: the daemon's last word in this boot's journal about vip was
// "owning VIP" (and the daemon is active).
func (g *gateway) owns(vip string) bool {
	if !g.up() {
		return false
	}
	if st, _ := g.run("systemctl", "is-active", "edgelb"); strings.TrimSpace(st) != "active" {
		return false
	}
	owned := false
	for _, e := range g.journal() {
		m := message(e)
		if m["vip"] != vip {
			continue
		}
		switch m["msg"] {
		case "owning VIP":
			owned = true
		case "released VIP":
			owned = false
		}
	}
	return owned
}

// owner is the one gateway owning the VIP (nil: none or both).
func (p *pair) owner() *gateway {
	var o *gateway
	for _, g := range p.gws {
		if g.owns(p.vip) {
			if o != nil {
				return nil
			}
			o = g
		}
	}
	return o
}

// steadyOwner waits for one owner that stays the owner for 2 s.
func (p *pair) steadyOwner(d time.Duration) *gateway {
	var last *gateway
	var since time.Time
	var got *gateway
	waitFor(d, func() bool {
		o := p.owner()
		if o == nil || o != last {
			last, since = o, time.Now()
			return false
		}
		if time.Since(since) >= 2*time.Second {
			got = o
			return true
		}
		return false
	})
	return got
}

func (p *pair) other(g *gateway) *gateway { return p.gws[2-g.i] }

// synced counts the streams (VIP port 9000) in g's external cache: the
// connections its peer sent it, which it commits when it takes over.
func (g *gateway) synced(vip string) int {
	out, _ := g.run("conntrackd", "-C", "/var/lib/edgelb/conntrackd/3780/conntrackd.conf", "-e", "ct")
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "dst="+vip+" ") && strings.Contains(l, fmt.Sprintf("dport=%d ", streamPort)) {
			n++
		}
	}
	return n
}

func (g *gateway) version() string {
	out, _ := g.run("dpkg-query", "-W", "-f", "${Version}", "edgelb")
	return strings.TrimSpace(out)
}

// TestSystemUpgrade: the previous package on an L2 pair with state sync,
// 20 requests/s and 20 long-lived streams through the VIP; `dpkg -i` of
// this commit's package on the standby, then on the owner. Every request
// answered, every stream kept, the store and the config carried over.
func TestSystemUpgrade(t *testing.T) {
	deb, old := debs(t)
	if old == "" {
		t.Fatal("EDGELB_OLD_DEB (lab/system/olddeb.sh's package) not set: run make test-system")
	}
	p := startPair(t, old)
	from := p.gws[0].version()
	conf := map[*gateway]string{}
	for _, g := range p.gws {
		conf[g] = g.must("md5sum", "/etc/edgelb/config.yaml")
	}
	tr := startTraffic(t, p.client, p.vip, 20, 20)
	defer tr.finish()
	// The streams reach the standby's external cache before anything moves.
	waitSynced := func(phase string) {
		t.Helper()
		o := p.steadyOwner(60 * time.Second)
		if o == nil {
			t.Fatalf("%s: no steady owner of %s", phase, p.vip)
		}
		s := p.other(o)
		if !waitFor(30*time.Second, func() bool { return s.synced(p.vip) >= len(tr.streams) }) {
			t.Fatalf("%s: %s's external cache holds %d/%d streams", phase, s.name, s.synced(p.vip), len(tr.streams))
		}
		t.Logf("%s: owner %s, standby %s holds %d streams", phase, o.name, s.name, s.synced(p.vip))
	}
	waitSynced("old pair")
	owner := p.owner()
	standby := p.other(owner)
	for _, step := range []*gateway{standby, owner} {
		pid := step.mainPID()
		t0 := time.Now()
		out, err := step.install(deb)
		if err != nil {
			t.Fatalf("upgrade of %s: %v", step.name, err)
		}
		took := time.Since(t0)
		if st, _ := step.run("systemctl", "is-active", "edgelb"); strings.TrimSpace(st) != "active" {
			t.Fatalf("%s after the upgrade: %s", step.name, step.statusText())
		}
		// postinst's try-restart put the new binary in place of the old.
		if p := step.mainPID(); p == pid {
			t.Errorf("%s: the upgrade did not restart edgelb (MainPID %s)", step.name, pid)
		}
		t.Logf("%s: dpkg -i %s in %.1f s (MainPID %s → %s): %s", step.name, step.version(), took.Seconds(), pid, step.mainPID(), lastLines(out, 2))
		stop, _ := step.run("journalctl", "-b", "-u", "edgelb", "--no-pager", "-o", "short-precise", "--since", t0.Add(-time.Second).UTC().Format("2006-01-02 15:04:05"))
		t.Logf("%s: the restart in the journal:\n%s", step.name, grepAny(stop, "Stopping", "Stopped", "Deactivated", "timed out", "Killing", "SIGKILL", "Starting", "Started", "shutting", "exit", "released", "handover"))
		// The stop hands over with conntrackd still running: systemd must
		// not signal it beside edgelb (KillMode=mixed), nor time the stop out.
		if bad := grepAny(stop, "can't connect", "timed out", "conntrackd exited; restarting"); bad != "" {
			t.Errorf("%s: the restart's handover went wrong:\n%s", step.name, bad)
		}
		waitSynced("after " + step.name)
	}
	end := time.Now()
	time.Sleep(2 * time.Second)
	kept := tr.kept(end)
	tr.finish()
	req, failed, errs := tr.counts()
	to := p.gws[0].version()
	t.Logf("MEASURED system-upgrade from=%s to=%s requests=%d failed=%d/%d kept=%d/%d", from, to, req, failed, req, kept, len(tr.streams))
	if failed > 0 {
		t.Errorf("%d/%d requests failed: %v", failed, req, errs)
	}
	if kept != len(tr.streams) {
		for k, s := range tr.streams {
			if last, err := s.state(); err != nil || !last.After(end) {
				t.Logf("stream %d: last read %s, error %v", k, last.Format("15:04:05.000"), err)
			}
		}
		t.Errorf("streams kept %d/%d", kept, len(tr.streams))
	}
	for _, g := range p.gws {
		g.logSystemdOnly(t)
		if v := g.version(); v != to || v == from {
			t.Errorf("%s runs package %s after the upgrade (from %s to %s)", g.name, v, from, to)
		}
		vip, err := g.assigned("web")
		if err != nil || vip != p.vip {
			t.Errorf("%s: web's VIP after the upgrade is %q (%v), was %s", g.name, vip, err, p.vip)
		}
		if c := g.must("md5sum", "/etc/edgelb/config.yaml"); c != conf[g] {
			t.Errorf("%s: the upgrade changed /etc/edgelb/config.yaml", g.name)
		}
	}
}

// logSystemdOnly logs what this boot's journal shows that only running
// under systemd brings out (the lab's child-process tests run edgelb and
// conntrackd as root without a sandbox, on stderr).
func (g *gateway) logSystemdOnly(t *testing.T) {
	t.Helper()
	var sched, protocols, warnAt6 int
	newPID := g.mainPID()
	for _, e := range g.journal() {
		msg, _ := e["MESSAGE"].(string)
		switch {
		case strings.Contains(msg, "scheduler configuration failed: Operation not permitted"):
			sched++
		case strings.Contains(msg, "cannot find protocol"):
			protocols++
		}
		// The running (new) edgelb files its warnings at their priority.
		if m := message(e); (m["level"] == "WARN" || m["level"] == "ERROR") && e["PRIORITY"] == "6" && e["_PID"] == newPID {
			warnAt6++
		}
	}
	if warnAt6 > 0 {
		t.Errorf("%s: %d WARN/ERROR lines of the running edgelb (pid %s) filed at PRIORITY=6", g.name, warnAt6, newPID)
	}
	t.Logf("%s under systemd: conntrackd's real-time scheduler refused by the unit's sandbox (RestrictRealtime, ~@resources; it continues with the default) %d times; "+
		"conntrackd missing /etc/protocols %d times; WARN/ERROR lines of the running edgelb at PRIORITY=6 %d",
		g.name, sched, protocols, warnAt6)
}

func grepAny(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
