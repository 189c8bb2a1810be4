// Package frr runs FRR's daemons (zebra, bgpd, optionally bfdd) as plain
// processes in a lab network namespace: the router the BGP labs peer with.
// FRR is Debian's frr package (lab/deps.sh bgp); Start skips the test
// without it.
package frr

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
)

// Start runs zebra, bgpd (with bgpdConf) and, with bfd, bfdd in ns, as
// user frr, from a fresh directory named after prefix (returned: vtysh's
// --vty_socket). The daemons are stopped by t.Cleanup; their logs are
// shown when the test failed.
func Start(t testing.TB, ns *netns.NS, prefix, bgpdConf string, bfd bool) string {
	t.Helper()
	for _, d := range []string{"zebra", "bgpd", "bfdd"} {
		if _, err := os.Stat("/usr/lib/frr/" + d); err != nil {
			t.Skipf("FRR %s not installed (lab/deps.sh bgp)", d)
		}
	}
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("no frr user: %v", err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chmod(dir, 0o755)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	confs := map[string]string{
		"zebra.conf": "hostname r\n",
		"bfdd.conf":  "hostname r\n",
		"bgpd.conf":  bgpdConf,
	}
	for name, c := range confs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
	}
	zs := filepath.Join(dir, "zserv.api")
	common := func(d string) []string {
		return []string{"/usr/lib/frr/" + d, "-f", filepath.Join(dir, d+".conf"), "-i", filepath.Join(dir, d+".pid"),
			"-z", zs, "--vty_socket", dir, "-A", "127.0.0.1", "-P", "0", "-u", "frr", "-g", "frr", "--log", "stdout"}
	}
	start(t, ns, "zebra", common("zebra"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(zs); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("zebra did not open its zserv socket in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if bfd {
		// bgpd asks bfdd for sessions through zebra.
		start(t, ns, "bfdd", append(common("bfdd"), "--bfdctl", filepath.Join(dir, "bfdd.sock")))
	}
	start(t, ns, "bgpd", common("bgpd"))
	return dir
}

// Vtysh runs one vtysh command against the daemons in dir (daemon "" is
// vtysh's default, all of them).
func Vtysh(ctx context.Context, dir, daemon, cmd string) ([]byte, error) {
	args := []string{"--vty_socket", dir}
	if daemon != "" {
		args = append(args, "-d", daemon)
	}
	return exec.CommandContext(ctx, "vtysh", append(args, "-c", cmd)...).Output()
}

// start runs one daemon in ns until the test ends (SIGTERM, SIGKILL after
// 20 s); it dies with the test process (parent-death signal).
func start(t testing.TB, ns *netns.NS, name string, argv []string) {
	t.Helper()
	log := &logbuf.Buffer{}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := ns.Do(cmd.Start); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, log.Tail(25))
		}
	})
}
