//go:build system

package system

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
)

// lower is the cached root unpacked once per test process; every machine
// boots from an overlay on it, so each boot starts from the same clean root.
var lower struct {
	sync.Once
	dir string
	err error
}

func lowerRoot(t *testing.T) string {
	t.Helper()
	lower.Do(func() {
		tar := os.Getenv("EDGELB_ROOTFS")
		if tar == "" {
			lower.err = errors.New("EDGELB_ROOTFS (lab/system/rootfs.sh's tarball) not set: run make test-system")
			return
		}
		if lower.dir, lower.err = os.MkdirTemp("/var/tmp", "esys-lower-"); lower.err != nil {
			return
		}
		if out, err := exec.Command("tar", "-C", lower.dir, "-xf", tar).CombinedOutput(); err != nil {
			lower.err = fmt.Errorf("unpack %s: %w: %s", tar, err, out)
		}
	})
	if lower.err != nil {
		t.Fatal(lower.err)
	}
	return lower.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lower.dir != "" {
		os.RemoveAll(lower.dir)
	}
	os.Exit(code)
}

// machine is one booted Debian: systemd-nspawn with its root on an overlay
// of the cached root, its network the namespace ns, its own launcher
// cgroups. boot may be called again after the machine went down (a reboot
// or a kill): the overlay, and so the machine's disk, stays.
type machine struct {
	t      *testing.T
	name   string
	ns     *netns.NS
	dir    string // upper, work, root (the overlay), console logs
	root   string
	boots  int
	cmd    *exec.Cmd
	done   chan struct{} // closed when nspawn exits
	pid1   int
	booted time.Duration // last boot: nspawn start to is-system-running
}

// newMachine prepares (does not boot) a machine in ns; t.Cleanup stops it
// and removes the overlay, the cgroups and nspawn's run-time files.
func newMachine(t *testing.T, name string, ns *netns.NS) *machine {
	t.Helper()
	m := &machine{t: t, name: name, ns: ns}
	var err error
	if m.dir, err = os.MkdirTemp("/var/tmp", "esys-"+name+"-"); err != nil {
		t.Fatal(err)
	}
	m.root = filepath.Join(m.dir, "root")
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(m.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lowerRoot(t), filepath.Join(m.dir, "upper"), filepath.Join(m.dir, "work"))
	if err := unix.Mount("overlay", m.root, "overlay", 0, opts); err != nil {
		os.RemoveAll(m.dir)
		t.Fatalf("overlay for %s: %v", name, err)
	}
	t.Cleanup(m.cleanup)
	return m
}

func (m *machine) cgroups() []string {
	return []string{"/sys/fs/cgroup/systemd/" + m.name, "/sys/fs/cgroup/unified/" + m.name}
}

// boot starts the machine and waits until systemd reports it running.
func (m *machine) boot() {
	t := m.t
	t.Helper()
	for _, cg := range m.cgroups() {
		if err := os.MkdirAll(cg, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.boots++
	console, err := os.Create(filepath.Join(m.dir, fmt.Sprintf("console%d.log", m.boots)))
	if err != nil {
		t.Fatal(err)
	}
	// The launcher moves itself into the machine's own cgroups before it
	// becomes nspawn: the container's systemd builds its tree there.
	script := `for cg in "$ESYS_CG1" "$ESYS_CG2"; do echo $$ >"$cg/cgroup.procs" || exit 1; done; exec systemd-nspawn "$@"`
	args := []string{"-c", script, "sh", "-q", "-D", m.root, "-b", "-M", m.name,
		"--network-namespace-path=/run/netns/" + m.ns.Name, "--register=no", "--keep-unit",
		"--capability=CAP_NET_ADMIN", "--link-journal=no", "--resolv-conf=off", "--timezone=off"}
	m.cmd = exec.Command("/bin/sh", args...)
	m.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "ESYS_CG1=" + m.cgroups()[0], "ESYS_CG2=" + m.cgroups()[1]}
	m.cmd.Stdout, m.cmd.Stderr = console, console
	start := time.Now()
	if err := m.cmd.Start(); err != nil {
		console.Close()
		t.Fatalf("systemd-nspawn %s: %v", m.name, err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		console.Close()
		close(done)
	}(m.cmd, m.done)
	m.pid1 = 0
	deadline := time.Now().Add(90 * time.Second)
	state := ""
	for time.Now().Before(deadline) {
		select {
		case <-m.done:
			t.Fatalf("%s: systemd-nspawn exited while booting: %s", m.name, m.console())
		default:
		}
		if m.pid1 == 0 {
			m.pid1 = childNamed(m.cmd.Process.Pid, "systemd")
		}
		if m.pid1 != 0 {
			out, _ := m.run("systemctl", "is-system-running")
			state = strings.TrimSpace(out)
			if state == "running" || state == "degraded" {
				m.booted = time.Since(start)
				if state == "degraded" {
					failed, _ := m.run("systemctl", "--failed", "--no-legend")
					t.Logf("%s booted degraded (failed units): %s", m.name, failed)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not running in 90 s (pid1 %d, state %q): %s", m.name, m.pid1, state, m.console())
}

// childNamed is the pid of a child of parent whose command is name (0: none).
func childNamed(parent int, name string) int {
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(parent), "-x", name).Output()
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

func (m *machine) console() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, fmt.Sprintf("console%d.log", m.boots)))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// run runs a command inside the machine (all its namespaces) and returns
// its combined output.
func (m *machine) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(m.pid1), "-a", "--", name}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "DEBIAN_FRONTEND=noninteractive", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %s %s: %w: %s", m.name, name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// must runs a command inside the machine and fails the test if it fails.
func (m *machine) must(name string, args ...string) string {
	m.t.Helper()
	out, err := m.run(name, args...)
	if err != nil {
		m.t.Fatal(err)
	}
	return out
}

// sh runs a shell script inside the machine.
func (m *machine) sh(script string) (string, error) { return m.run("/bin/sh", "-ec", script) }

// writeFile writes a file into the machine's disk (the overlay).
func (m *machine) writeFile(path string, data []byte, mode os.FileMode) {
	m.t.Helper()
	p := filepath.Join(m.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		m.t.Fatal(err)
	}
}

// copyIn copies a host file into the machine's disk.
func (m *machine) copyIn(src, path string) {
	m.t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		m.t.Fatal(err)
	}
	m.writeFile(path, b, 0o644)
}

func (m *machine) up() bool {
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// poweroff asks systemd to shut down (SIGRTMIN+3, as `machinectl poweroff`)
// and waits for nspawn to exit; a machine that does not is killed.
func (m *machine) poweroff(timeout time.Duration) error {
	if !m.up() {
		return nil
	}
	exec.Command("kill", "-s", "RTMIN+3", strconv.Itoa(m.pid1)).Run()
	select {
	case <-m.done:
		return nil
	case <-time.After(timeout):
		m.kill()
		return fmt.Errorf("%s did not power off in %v: killed; console: %s", m.name, timeout, m.console())
	}
}

// kill is a hard kill: SIGKILL to the container's PID 1 takes every process
// of its PID namespace with it, as a power cut would; nspawn then exits.
func (m *machine) kill() {
	if !m.up() {
		return
	}
	syscall.Kill(m.pid1, syscall.SIGKILL)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

// afterExit removes what a machine run leaves on the host: its cgroup trees
// (deepest first) and nspawn's per-machine run-time directories.
func (m *machine) afterExit() error {
	var errs []error
	for _, cg := range m.cgroups() {
		var dirs []string
		filepath.WalkDir(cg, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			var err error
			for i := 0; i < 50; i++ { // a cgroup empties a moment after its last process
				if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, d := range []string{"/run/systemd/nspawn/propagate/" + m.name, "/run/systemd/nspawn/unix-export/" + m.name} {
		unix.Unmount(d, unix.MNT_DETACH)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *machine) cleanup() {
	if err := m.poweroff(30 * time.Second); err != nil {
		m.t.Log(err)
	}
	if err := m.afterExit(); err != nil {
		m.t.Errorf("cleanup of %s: %v", m.name, err)
	}
	if err := unix.Unmount(m.root, unix.MNT_DETACH); err != nil {
		m.t.Errorf("unmount %s: %v (left %s)", m.root, err, m.dir)
		return
	}
	os.RemoveAll(m.dir)
}
