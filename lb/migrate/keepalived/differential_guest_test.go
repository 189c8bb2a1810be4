//go:build ipvsguest

package keepalived

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/edgelbbin"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy/ipvs"
)

// TestIPVSGuestKeepalivedDifferential: for every keepalived.conf of
// testdata/corpus, Debian's keepalived is started in a namespace of the
// guest and its IPVS table dumped (ipvsadm -Sn); then `edgelb run` with
// the converted config (IPVS dataplane) in the same namespace, dumped
// again. The tables must be equal line for line (as sets: the order of -a
// lines is the kernel's insertion order, which neither tool promises),
// except lines a report finding names by its IPVS service and scope.
//
// Both tables are the configured ones, before any checker concluded: the
// real servers' addresses lead to a peer namespace that drops every packet,
// so a check can only time out (connect_timeout, seconds later); the
// keepalived dump counts only if keepalived's log shows no checker-driven
// change by the time the dump is read (else the file is retried).
func TestIPVSGuestKeepalivedDifferential(t *testing.T) {
	netns.RequireRoot(t)
	if err := ipvs.Available(); err != nil {
		t.Fatalf("the guest kernel must have IPVS: %v", err)
	}
	for _, p := range []string{"keepalived", "ipvsadm"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("the guest needs %s (lab/guest copies the host's in; lab/deps.sh ipvs installs it): %v", p, err)
		}
	}
	edgelb := edgelbbin.Path(t)
	files, _ := filepath.Glob("testdata/corpus/*.conf")
	sort.Strings(files)
	if len(files) < 15 {
		t.Fatalf("corpus has %d files, want >= 15", len(files))
	}
	var equal, explained, unexplained int
	for i, f := range files {
		d := differential(t, i, f, edgelb)
		t.Logf("RESULT %s: keepalived %d lines, edgelb %d lines, equal %d, explained %d, unexplained %d",
			filepath.Base(f), d.kaLines, d.elLines, d.same, len(d.explained), len(d.unexplained))
		for _, l := range d.explained {
			t.Logf("  explained %s", l)
		}
		for _, l := range d.unexplained {
			t.Errorf("  UNEXPLAINED %s: %s", filepath.Base(f), l)
		}
		if len(d.explained) == 0 && len(d.unexplained) == 0 {
			equal++
		} else if len(d.unexplained) == 0 {
			explained++
		} else {
			unexplained++
		}
	}
	t.Logf("MEASURED migrate-keepalived files=%d equal=%d explained=%d unexplained=%d", len(files), equal, explained, unexplained)
	if unexplained > 0 {
		t.Fatalf("%d files with unexplained differences", unexplained)
	}
}

type diffResult struct {
	kaLines, elLines, same int
	explained, unexplained []string
}

// syncBuf is a log both a child's stdout and stderr write to.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// checkerChange: keepalived's log lines for a table change a checker (or
// quorum) made (ipwrapper.c).
var checkerChange = regexp.MustCompile(`(Adding|Removing|Enabling|Disabling) service|(Adding|Removing) sorry server|Changing weight|the pool for VS`)

func differential(t *testing.T, i int, file, edgelb string) diffResult {
	nodes, err := ParseFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	res, err := Convert(nodes, Options{})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := netns.NewT(t, fmt.Sprintf("kd%d", i))
	peer := netns.NewT(t, fmt.Sprintf("kp%d", i))
	run := func(n *netns.NS, args ...string) {
		if out, err := n.Exec(ctx, args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v: %v\n%s", n.Name, args, err, out)
		}
	}
	// eth0 and eth1 (the names the samples use) lead to the peer, which
	// answers ARP/ND for its own address and drops everything else.
	for k, ifn := range []string{"eth0", "eth1"} {
		if err := netns.Veth(ns, ifn, peer, fmt.Sprintf("p%d", k)); err != nil {
			t.Fatal(err)
		}
		run(ns, "ip", "link", "set", ifn, "up")
		run(peer, "ip", "link", "set", fmt.Sprintf("p%d", k), "up")
		run(ns, "ip", "addr", "add", fmt.Sprintf("100.64.%d.1/30", k), "dev", ifn)
		run(peer, "ip", "addr", "add", fmt.Sprintf("100.64.%d.2/30", k), "dev", fmt.Sprintf("p%d", k))
		run(ns, "ip", "-6", "addr", "add", fmt.Sprintf("fd00:64:%d::1/64", k), "dev", ifn, "nodad")
		run(peer, "ip", "-6", "addr", "add", fmt.Sprintf("fd00:64:%d::2/64", k), "dev", fmt.Sprintf("p%d", k), "nodad")
	}
	run(ns, "ip", "route", "add", "default", "via", "100.64.0.2")
	run(ns, "ip", "-6", "route", "add", "default", "via", "fd00:64:0::2")
	run(peer, "nft", "add table inet kdrop; add chain inet kdrop in { type filter hook prerouting priority -300; policy drop; }; "+
		"add rule inet kdrop in icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept")

	dir := t.TempDir()
	abs, _ := filepath.Abs(file)
	vrrp := 0
	for _, n := range nodes {
		if n.Name == "vrrp_instance" {
			vrrp++
		}
	}
	var kaTable string
	for attempt := 1; ; attempt++ {
		table, log, err := keepalivedTable(ctx, ns, abs, dir, res, vrrp)
		if err != nil {
			t.Fatalf("%s: keepalived: %v\n%s", file, err, log)
		}
		if m := checkerChange.FindString(log); m == "" {
			kaTable = table
			t.Logf("%s: keepalived attempt %d; VRRP instances %d, reached MASTER before the dump: %d", filepath.Base(file), attempt, vrrp, strings.Count(log, "Entering MASTER STATE"))
			break
		} else if attempt == 3 {
			t.Fatalf("%s: a checker changed keepalived's table before the dump in 3 attempts (%q)\n%s", file, m, log)
		}
	}
	run(ns, "ipvsadm", "-C")
	elTable, log, err := edgelbTable(ctx, ns, edgelb, dir, res)
	if err != nil {
		t.Fatalf("%s: edgelb: %v\n%s", file, err, log)
	}
	run(ns, "ipvsadm", "-C")
	return compareTables(kaTable, elTable, res)
}

// keepalivedTable runs keepalived on conf and dumps its table once its
// checker logged the topology and, with vrrp instances, once every one of
// them logged "Entering MASTER STATE" (the master-down timer, ~3 s at
// advert_int 1; the peer drops every advert, so each becomes MASTER) or
// 30 s passed — the caller logs how many did.
func keepalivedTable(ctx context.Context, ns *netns.NS, conf, dir string, res *Result, vrrp int) (string, string, error) {
	log := &syncBuf{}
	cmd := ns.Command(ctx, "keepalived", "-n", "-l", "-D", "-d", "-f", conf,
		"-p", dir+"/ka.pid", "-c", dir+"/ka-check.pid", "-r", dir+"/ka-vrrp.pid")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	}
	defer stop()
	src, _ := os.ReadFile(conf)
	// The checker process logs its dump (-d) right after it installed the
	// IPVS table and before it registers a checker (check_daemon.c).
	want := "LVS Topology"
	if !strings.Contains(string(src), "virtual_server") && !includes(res) {
		want = "VRRP Topology"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			return "", log.String(), fmt.Errorf("no %q in keepalived's log after 2 min", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for end := time.Now().Add(30 * time.Second); vrrp > 0 && strings.Count(log.String(), "Entering MASTER STATE") < vrrp && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	out, err := ns.Exec(ctx, "ipvsadm", "-Sn")
	if err != nil {
		return "", log.String(), err
	}
	l := log.String() // read after the dump: a change before it is in here
	stop()
	return string(out), l, nil
}

func includes(res *Result) bool {
	for _, f := range res.Notes {
		if strings.HasPrefix(f.Keyword, "include") {
			return true
		}
	}
	return false
}

// edgelbTable runs `edgelb run` with the converted config plus an IPVS
// dataplane, a state dir and an API on loopback, and dumps the table once
// the daemon said READY=1 (after its first converged Apply).
func edgelbTable(ctx context.Context, ns *netns.NS, bin, dir string, res *Result) (string, string, error) {
	y, err := res.YAML()
	if err != nil {
		return "", "", err
	}
	cfg := string(y) + fmt.Sprintf("dataplane:\n  mode: ipvs\napi:\n  listen: 127.0.0.1:18080\nstate:\n  dir: %s/state\n", dir)
	if res.Config.Announce == nil {
		cfg += "announce:\n  l2:\n    interface: eth0\n"
	}
	path := dir + "/edgelb.yaml"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", "", err
	}
	sock := dir + "/notify.sock"
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return "", "", err
	}
	defer ln.Close()
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := ln.ReadFromUnix(buf)
			if err != nil {
				return
			}
			if strings.Contains(string(buf[:n]), "READY=1") {
				close(ready)
				return
			}
		}
	}()
	log := &syncBuf{}
	cmd := ns.Command(ctx, bin, "run", "--config", path)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
	}()
	select {
	case <-ready:
	case err := <-exited:
		exited <- err
		return "", log.String() + "\nconfig:\n" + cfg, fmt.Errorf("edgelb run exited before READY: %v", err)
	case <-time.After(2 * time.Minute):
		return "", log.String(), fmt.Errorf("no READY=1 from edgelb run in 2 min")
	}
	out, err := ns.Exec(ctx, "ipvsadm", "-Sn")
	return string(out), log.String(), err
}

// vsOf is the virtual service an ipvsadm -Sn line belongs to ("-t A:P")
// and whether it is the service line (-A) or a real server (-a).
func vsOf(line string) (svc string, real bool) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return "", false
	}
	return f[1] + " " + f[2], f[0] == "-a"
}

func compareTables(ka, el string, res *Result) diffResult {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				m[l]++
			}
		}
		return m
	}
	a, b := count(ka), count(el)
	d := diffResult{}
	for _, n := range a {
		d.kaLines += n
	}
	for _, n := range b {
		d.elLines += n
	}
	var diff []string
	for l, n := range a {
		common := min(n, b[l])
		d.same += common
		for k := common; k < n; k++ {
			diff = append(diff, "keepalived only: "+l)
		}
	}
	for l, n := range b {
		for k := a[l]; k < n; k++ {
			diff = append(diff, "edgelb only: "+l)
		}
	}
	sort.Strings(diff)
	all := append(append([]Finding(nil), res.Unsupported...), res.Notes...)
	for _, l := range diff {
		_, line, _ := strings.Cut(l, ": ")
		svc, real := vsOf(line)
		var by *Finding
		for k := range all {
			f := &all[k]
			if f.Service != svc {
				continue
			}
			if f.Scope == ScopeAll || (f.Scope == ScopeService && !real) || (f.Scope == ScopeReal && real) {
				by = f
				break
			}
		}
		if by != nil {
			d.explained = append(d.explained, fmt.Sprintf("%s  ← %s", l, by))
		} else {
			d.unexplained = append(d.unexplained, l)
		}
	}
	return d
}
