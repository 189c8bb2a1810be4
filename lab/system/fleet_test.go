//go:build system

package system

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
)

const fleetToken = "esys-fleet-token"

var etcdAddr = syncLink(50)

// startEtcd runs one etcd member (lab/tools/build.sh etcd's binary) as a
// process in its own namespace on the sync link, stopped by t.Cleanup.
func (l *lab) startEtcd() {
	t := l.t
	t.Helper()
	cache := os.Getenv("EDGELB_CACHE")
	if cache == "" {
		cache = "/var/cache/edgelb"
	}
	bin := filepath.Join(cache, "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcd: %v (lab/tools/build.sh etcd; make test-system runs it)", err)
	}
	n := netns.NewT(t, "esyse")
	l.attach(n, "et", "br2", "eth0", etcdAddr)
	data, err := os.MkdirTemp("/var/tmp", "esys-etcd-")
	must(t, err)
	url := "http://" + etcdAddr.Addr().String()
	log := &logbuf.Buffer{}
	cmd := exec.Command(bin, "--name", "m0", "--data-dir", data,
		"--listen-peer-urls", url+":2380", "--initial-advertise-peer-urls", url+":2380",
		"--listen-client-urls", url+":2379", "--advertise-client-urls", url+":2379",
		"--initial-cluster", "m0="+url+":2380", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, n.Do(cmd.Start))
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("etcd (tail):\n%s", log.Tail(20))
		}
		os.RemoveAll(data)
	})
	hc := n.HTTPClient(time.Second)
	if !waitFor(30*time.Second, func() bool {
		resp, err := hc.Get(url + ":2379/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("etcd not healthy in 30 s:\n%s", log.Tail(20))
	}
}

// fleetConfig is gateway i's config in fleet mode: the shared state in
// etcd, writes with the token.
func fleetConfig(i int) string {
	return render(i, "192.0.2.100-192.0.2.120",
		fmt.Sprintf("state: {type: etcd, endpoints: [\"http://%s:2379\"], prefix: /esys, gateway: gw%d}\n", etcdAddr.Addr(), i),
		"tokenFile: /etc/edgelb/token")
}

// put creates a service through the gateway's REST API; it returns the
// VIP the answer gave.
func (g *gateway) put(name string) (string, error) {
	body := fmt.Sprintf(`{"name":%q,"pool":"front","ports":[{"port":80,"targetPort":%d}],"backends":[{"address":%q}]}`,
		name, httpPort, back(21).Addr().String())
	out, err := g.run("curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", "-X", "PUT",
		"-H", "Authorization: Bearer "+fleetToken, "-H", "Content-Type: application/json",
		"--data", body, "http://127.0.0.1:8080/api/v1/services/"+name)
	if err != nil {
		return "", err
	}
	out = strings.TrimSpace(out)
	i := strings.LastIndex(out, "\n")
	if i < 0 || !strings.HasPrefix(out[i+1:], "2") {
		return "", fmt.Errorf("%s: PUT %s: %s", g.name, name, out)
	}
	return g.assigned(name)
}

// TestSystemFleetRoll: two gateways in fleet mode on one etcd, one on the
// previous package and one on this commit's. Services written through
// either gateway's REST API are seen by the other with the same VIP (the
// store's schema read both ways); then the old one is upgraded and
// everything is still there, and writable.
func TestSystemFleetRoll(t *testing.T) {
	deb, old := debs(t)
	if old == "" {
		t.Fatal("EDGELB_OLD_DEB (lab/system/olddeb.sh's package) not set: run make test-system")
	}
	l := newLab(t, 2)
	l.startEtcd()
	for _, g := range l.gws {
		g.boot()
	}
	oldGW, newGW := l.gws[0], l.gws[1]
	for g, pkg := range map[*gateway]string{oldGW: old, newGW: deb} {
		if _, err := g.install(pkg); err != nil {
			t.Fatal(err)
		}
		g.writeFile("/etc/edgelb/token", []byte(fleetToken+"\n"), 0o644)
		g.writeFile("/etc/edgelb/config.yaml", []byte(fleetConfig(g.i)), 0o644)
	}
	from, to := oldGW.version(), newGW.version()
	for _, g := range l.gws {
		if out, err := g.run("systemctl", "enable", "--now", "edgelb"); err != nil {
			t.Fatalf("%s (%s): enable --now: %v\n%s\n%s", g.name, g.version(), err, out, g.statusText())
		}
	}

	// Alternate writers; each write is seen by the other gateway with the
	// address the writer's answer gave.
	writes, seen := 0, 0
	check := func(w *gateway, name string) {
		t.Helper()
		vip, err := w.put(name)
		if err != nil {
			t.Fatalf("write through %s (%s): %v\n%s", w.name, w.version(), err, w.statusText())
		}
		writes++
		other := l.gws[2-w.i]
		var got string
		if waitFor(20*time.Second, func() bool { got, _ = other.assigned(name); return got == vip }) {
			seen++
			return
		}
		_, err = other.assigned(name)
		t.Errorf("%s (%s) wrote %s with %s; %s (%s) shows %q (%v)", w.name, w.version(), name, vip, other.name, other.version(), got, err)
	}
	for k := range 4 {
		check(oldGW, fmt.Sprintf("old%d", k))
		check(newGW, fmt.Sprintf("new%d", k))
	}
	before := map[string]string{}
	for _, g := range l.gws {
		for k := range 4 {
			for _, name := range []string{fmt.Sprintf("old%d", k), fmt.Sprintf("new%d", k)} {
				vip, err := g.assigned(name)
				if err != nil {
					t.Errorf("%s: %v", g.name, err)
				}
				if b, ok := before[name]; ok && b != vip {
					t.Errorf("%s: %s has %s on one gateway, %s on the other", g.name, name, b, vip)
				}
				before[name] = vip
			}
		}
	}

	// The roll's second half: the old gateway gets this commit's package.
	if out, err := oldGW.install(deb); err != nil {
		t.Fatalf("upgrade of %s: %v\n%s", oldGW.name, err, out)
	}
	if st, _ := oldGW.run("systemctl", "is-active", "edgelb"); strings.TrimSpace(st) != "active" {
		t.Fatalf("%s after the upgrade: %s", oldGW.name, oldGW.statusText())
	}
	if v := oldGW.version(); v != to {
		t.Errorf("%s runs %s after the upgrade, want %s", oldGW.name, v, to)
	}
	for name, vip := range before {
		var got string
		if !waitFor(20*time.Second, func() bool { got, _ = oldGW.assigned(name); return got == vip }) {
			t.Errorf("after the upgrade %s shows %s as %q, was %s", oldGW.name, name, got, vip)
		}
	}
	check(oldGW, "rolled")
	check(newGW, "rolled2")
	for _, g := range l.gws {
		g.logSystemdOnly(t)
	}
	t.Logf("MEASURED system-fleet-roll from=%s to=%s writes=%d seen_by_other=%d", from, to, writes, seen)
}
