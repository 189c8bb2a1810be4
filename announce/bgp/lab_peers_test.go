//go:build bgp

package bgp

// The routers: FRR's bgpd alone (no zebra: -Z, no kernel routes: -n) and
// BIRD 2, each in its own namespace, started in the foreground so the
// process we hold is the daemon itself (ip netns exec execs in place) and
// is killed by PID when the test ends; their files live in a scratch
// directory removed with it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
)

// daemon is a router process in a namespace.
type daemon struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	dir  string
	logs *logbuf.Buffer
	done chan struct{}
}

// scratchDir is a directory the frr user can enter (t.TempDir's parents
// are private to root), removed when the test ends.
func scratchDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startDaemon(t testing.TB, ns *netns.NS, name, dir string, argv ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, name: name, dir: dir, logs: &logbuf.Buffer{}, done: make(chan struct{})}
	d.cmd = ns.Command(context.Background(), argv[0], argv[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("%s (pid %d) log:\n%s", name, d.cmd.Process.Pid, d.logs)
		}
	})
	return d
}

// stop kills the daemon by PID: SIGTERM, then SIGKILL after 3 s.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
		return
	case <-time.After(3 * time.Second):
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}

func waitFile(t testing.TB, d *daemon, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("%s exited:\n%s", d.name, d.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never created %s:\n%s", d.name, path, d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func requireBinary(t testing.TB, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s not installed (lab/deps.sh bgp installs %s)", path, pkg)
	}
}

// ---- FRR ----

type frr struct {
	*daemon
	vty string // bgpd's vtysh socket
}

// startFRR runs bgpd with conf in ns.
func startFRR(t testing.TB, ns *netns.NS, conf string) *frr {
	t.Helper()
	requireBinary(t, "/usr/lib/frr/bgpd", "frr")
	dir := scratchDir(t, "edgelb-frr-")
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("no frr user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil { // bgpd creates its vty socket here as frr
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, ns, "bgpd", dir, "/usr/lib/frr/bgpd", "-Z", "-n", "-f", cfg, "-i", filepath.Join(dir, "bgpd.pid"),
		"--vty_socket", dir, "-A", "127.0.0.1", "-P", "0", "-u", "frr", "-g", "frr", "--log", "stdout")
	f := &frr{daemon: d, vty: filepath.Join(dir, "bgpd.vty")}
	waitFile(t, d, f.vty)
	return f
}

// exec runs one vty command over bgpd's socket, as vtysh does: the command
// and a NUL out; the output, three NULs and a status byte back. Talking to
// the socket directly (not forking vtysh) keeps a poll under a millisecond.
func (f *frr) exec(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", f.vty, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append([]byte(cmd), 0)); err != nil {
		return "", err
	}
	var out bytes.Buffer
	r := bufio.NewReader(c)
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if b := out.Bytes(); len(b) >= 4 && bytes.Equal(b[len(b)-4:len(b)-1], []byte{0, 0, 0}) {
			if st := b[len(b)-1]; st != 0 {
				return string(b[:len(b)-4]), fmt.Errorf("vty %q: status %d: %s", cmd, st, b[:len(b)-4])
			}
			return string(b[:len(b)-4]), nil
		}
		if err != nil {
			return out.String(), fmt.Errorf("vty %q: %w", cmd, err)
		}
	}
}

func (f *frr) mustExec(cmd string) string {
	f.t.Helper()
	out, err := f.exec(cmd)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// frrPath is one path of a prefix in bgpd's RIB (show bgp ... json).
type frrPath struct {
	Valid     bool `json:"valid"`
	Multipath bool `json:"multipath"`
	Stale     bool `json:"stale"`
	Bestpath  *struct {
		Overall bool `json:"overall"`
	} `json:"bestpath"`
	LocalPref *uint32 `json:"locPrf"`
	LocalPrf2 *uint32 `json:"localpref"`
	Community *struct {
		String string `json:"string"`
	} `json:"community"`
	LargeCommunity *struct {
		String string `json:"string"`
	} `json:"largeCommunity"`
	Nexthops []struct {
		IP         string `json:"ip"`
		Accessible bool   `json:"accessible"`
	} `json:"nexthops"`
	Peer struct {
		PeerID string `json:"peerId"`
	} `json:"peer"`
}

func (p frrPath) localPref() uint32 {
	switch {
	case p.LocalPref != nil:
		return *p.LocalPref
	case p.LocalPrf2 != nil:
		return *p.LocalPrf2
	}
	return 0
}

func (p frrPath) communities() string {
	if p.Community == nil {
		return ""
	}
	return p.Community.String
}

func (p frrPath) large() string {
	if p.LargeCommunity == nil {
		return ""
	}
	return p.LargeCommunity.String
}

func (p frrPath) nexthop() string {
	if len(p.Nexthops) == 0 {
		return ""
	}
	return p.Nexthops[0].IP
}

// prefix returns the paths bgpd holds for prefix (none when absent).
func (f *frr) prefix(prefix string) ([]frrPath, error) {
	afi := "ipv4"
	if strings.Contains(prefix, ":") {
		afi = "ipv6"
	}
	out, err := f.exec(fmt.Sprintf("show bgp %s unicast %s json", afi, prefix))
	if err != nil {
		return nil, err
	}
	var v struct {
		Paths []frrPath `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	return v.Paths, nil
}

// waitPrefix polls bgpd until cond holds for prefix's paths.
func (f *frr) waitPrefix(prefix, what string, within time.Duration, cond func([]frrPath) bool) []frrPath {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		paths, err := f.prefix(prefix)
		if err != nil {
			f.t.Fatal(err)
		}
		if cond(paths) {
			return paths
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("FRR never showed %s for %s; it has %+v\n%s", what, prefix, paths, f.mustExec("show bgp summary"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- BIRD ----

type bird struct {
	*daemon
	ctl string
}

func startBIRD(t testing.TB, ns *netns.NS, conf string) *bird {
	t.Helper()
	requireBinary(t, "/usr/sbin/bird", "bird2")
	dir := scratchDir(t, "edgelb-bird-")
	cfg := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bird{ctl: filepath.Join(dir, "bird.ctl")}
	b.daemon = startDaemon(t, ns, "bird", dir, "/usr/sbin/bird", "-f", "-c", cfg, "-s", b.ctl, "-P", filepath.Join(dir, "bird.pid"))
	waitFile(t, b.daemon, b.ctl)
	return b
}

func (b *bird) birdc(cmd string) (string, error) {
	out, err := exec.Command("birdc", "-s", b.ctl, cmd).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %w: %s", cmd, err, out)
	}
	return string(out), nil
}

// birdRoute is what `show route for P all` says about one route.
type birdRoute struct {
	Present   bool
	Text      string
	NextHop   string
	LocalPref string
	Comms     string
	Large     string
}

func (b *bird) route(prefix string) (birdRoute, error) {
	out, err := b.birdc("show route " + prefix + " all")
	if strings.Contains(out, "Network not found") {
		return birdRoute{Text: out}, nil // birdc exits 1 then
	}
	if err != nil {
		return birdRoute{}, err
	}
	r := birdRoute{Text: out}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, prefix+" "):
			r.Present = true
		case strings.HasPrefix(l, "BGP.next_hop:"):
			r.NextHop = strings.TrimSpace(strings.TrimPrefix(l, "BGP.next_hop:"))
		case strings.HasPrefix(l, "BGP.local_pref:"):
			r.LocalPref = strings.TrimSpace(strings.TrimPrefix(l, "BGP.local_pref:"))
		case strings.HasPrefix(l, "BGP.community:"):
			r.Comms = strings.TrimSpace(strings.TrimPrefix(l, "BGP.community:"))
		case strings.HasPrefix(l, "BGP.large_community:"):
			r.Large = strings.TrimSpace(strings.TrimPrefix(l, "BGP.large_community:"))
		}
	}
	return r, nil
}

func (b *bird) waitRoute(prefix, what string, within time.Duration, cond func(birdRoute) bool) birdRoute {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := b.route(prefix)
		if err != nil {
			b.t.Fatal(err)
		}
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			proto, _ := b.birdc("show protocols all")
			b.t.Fatalf("BIRD never showed %s for %s; it has:\n%s\n%s", what, prefix, r.Text, proto)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
