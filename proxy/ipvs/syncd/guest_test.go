//go:build ipvsguest

package syncd

import (
	"testing"

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
	syncerConverges(t, openIn(t), "sync0")
}
