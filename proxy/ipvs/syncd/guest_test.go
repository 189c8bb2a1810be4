//go:build ipvsguest

package syncd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// openIn opens the real Kernel in a fresh namespace with a veth pair
// (sync0 here, its peer in a second namespace), so no state is shared.
func openIn(t *testing.T) *Netlink {
	t.Helper()
	a := netns.NewT(t, "sda")
	b := netns.NewT(t, "sdb")
	if err := netns.Veth(a, "sync0", b, "sync0"); err != nil {
		t.Fatal(err)
	}
	k, err := Open("/run/netns/" + a.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stop what a failed test left running before the namespace goes.
		for _, r := range []Role{Master, Backup} {
			_ = k.Stop(r)
		}
		k.Close()
	})
	return k
}

// TestIPVSGuestSyncDaemonRules: the real kernel obeys the rules the Fake
// implements (the same checks as TestFakeKernelRules).
func TestIPVSGuestSyncDaemonRules(t *testing.T) {
	kernelRules(t, openIn(t), "sync0")
}

// TestIPVSGuestSyncDaemonSet: Syncer.Set/Get converge the real kernel.
func TestIPVSGuestSyncDaemonSet(t *testing.T) {
	k := openIn(t)
	k.Timeout = 15 * time.Second
	syncerConverges(t, diagKernel{Netlink: k, t: t}, "sync0")
}

// diagKernel wraps the real Kernel: a request that times out dumps the
// kernel stacks of the IPVS sync threads and of this process, so a hang in
// the kernel is shown rather than guessed.
type diagKernel struct {
	*Netlink
	t *testing.T
}

func (d diagKernel) Stop(r Role) error {
	err := d.Netlink.Stop(r)
	if errors.Is(err, ErrTimeout) {
		dumpKernelStacks(d.t)
	}
	return err
}

func dumpKernelStacks(t *testing.T) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		comm, _ := os.ReadFile(d + "/comm")
		c := strings.TrimSpace(string(comm))
		if !strings.HasPrefix(c, "ipvs") && filepath.Base(d) != self {
			continue
		}
		tasks, _ := filepath.Glob(d + "/task/*")
		for _, tk := range tasks {
			st, _ := os.ReadFile(tk + "/stack")
			stat, _ := os.ReadFile(tk + "/stat")
			if len(st) > 0 {
				t.Logf("kernel stack of %s (%s) %s:\n%s", tk, c, strings.Fields(string(stat))[2], st)
			}
		}
	}
	if out, err := exec.Command("dmesg").CombinedOutput(); err == nil {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("dmesg tail:\n%s", strings.Join(lines, "\n"))
	}
}
