//go:build bgp

package ecmp

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/announce"
)

// TestBGPBFDUnprivileged: edgelb not run as root, with BFD on its peer
// (TestBGPBFDMultihop's topology and FRR), under two identities.
//
// The packaged unit's (a uid /etc/passwd does not know, as DynamicUser=yes
// gives, with only CAP_NET_ADMIN and CAP_NET_RAW): FRR's bfdd would exit at
// start, so edgelb does not run it. The gateway still starts, BGP comes up
// and the VIP is routed; the peer's BFD is "unavailable" with the reason in
// the REST API, no bfdd runs, and FRR has no BFD session up.
//
// A user in group frrvty with CAP_NET_BIND_SERVICE, CAP_NET_RAW and
// CAP_SYS_ADMIN besides (the frr user stands in for such a system user):
// what README "BFD: who may run bfdd" asks suffices — edgelb runs bfdd as
// itself and BFD comes up at both ends.
func TestBGPBFDUnprivileged(t *testing.T) {
	exe := worldExecutable(t, edgelbBinary(t))
	unitCaps := []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW}

	t.Run("the packaged unit's identity", func(t *testing.T) {
		m := newMultihop(t)
		const uid = 61234
		if _, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			t.Fatalf("uid %d is in /etc/passwd; the case needs one that is not", uid)
		}
		d := startWith(t, m.gw, "edgelb", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid},
			AmbientCaps: unitCaps}, exe, "run", "--config", m.config(t, uid, uid))
		m.wait("BGP up, BFD unavailable", 60*time.Second, func(p announce.PeerState, f frrBFD) bool {
			return p.State == "Established" && p.BFD != nil && p.BFD.State == "unavailable" && m.routed()
		})
		p, _ := m.peer()
		t.Logf("edgelb: %s; %s", p.State, p.Detail)
		if !strings.Contains(p.BFD.Diagnostic, "uid 61234, which /etc/passwd does not know") {
			t.Errorf("BFD diagnostic %q does not give the reason", p.BFD.Diagnostic)
		}
		if n := bfddIn(t, m.gw); n != 0 {
			t.Errorf("%d bfdd processes in the gateway's namespace, want none (it would only exit and restart)", n)
		}
		if f := m.frr.bfd(); f.Status == "up" {
			t.Errorf("FRR's BFD session is up: %+v", f)
		}
		if log := d.log.String(); !strings.Contains(log, "bfd cannot run on this gateway") {
			t.Errorf("no error line in the daemon's log:\n%s", d.log.Tail(20))
		}
	})

	t.Run("a user in frrvty with bfdd's capabilities", func(t *testing.T) {
		m := newMultihop(t)
		u, err := user.Lookup("frr")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		var groups []uint32
		gids, _ := u.GroupIds()
		for _, g := range gids {
			n, _ := strconv.Atoi(g)
			groups = append(groups, uint32(n))
		}
		startWith(t, m.gw, "edgelb", &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups},
			AmbientCaps: append(unitCaps, unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_ADMIN),
		}, exe, "run", "--config", m.config(t, uid, gid))
		took := m.wait("BGP and BFD up", 60*time.Second, func(p announce.PeerState, f frrBFD) bool {
			return p.State == "Established" && p.BFD != nil && p.BFD.State == "up" && f.Status == "up" && m.routed()
		})
		p, _ := m.peer()
		t.Logf("edgelb as frr (uid %d, groups %v): %s, BFD %s at both ends %v after start", uid, groups, p.State, p.BFD.State, took.Round(time.Millisecond))
	})
}

// worldExecutable copies the daemon where any user may run it (the built
// one sits in a directory only root can enter).
func worldExecutable(t *testing.T, exe string) string {
	t.Helper()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "edgelb-exe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "edgelb")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
