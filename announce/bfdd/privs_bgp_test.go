//go:build bgp

package bfdd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestBGPBFDPrivileges runs Debian's real bfdd under identities a gateway
// could give it and checks that plan (what Start and `edgelb check` use)
// predicts each outcome: started, or refused at start. The identities are
// set as Go's exec sets them for edgelb's own children (Credential,
// AmbientCaps), as systemd's User=, SupplementaryGroups= and
// AmbientCapabilities= would. bfdd runs in a namespace of the
// test's own (it binds the BFD ports).
func TestBGPBFDPrivileges(t *testing.T) {
	netns.RequireRoot(t)
	if _, err := exec.LookPath(DefaultBinary); err != nil {
		t.Fatalf("%s: %v (lab/deps.sh bgp installs frr)", DefaultBinary, err)
	}
	ns := netns.NewT(t, "elb-bfdp")
	all, noAdmin := bfddCaps, bfddCaps[:2]
	frrvty, err := osUsers{}.LookupGroup(vtyGroup)
	if err != nil {
		t.Fatal(err)
	}
	vty, _ := strconv.Atoi(frrvty.Gid)
	own := []uint32(nil) // the user's groups from the database
	for _, c := range []struct {
		name, user string
		groups     []uint32 // the process's groups; own: the database's
		caps       []capability
	}{
		{"a uid /etc/passwd does not know (DynamicUser=yes)", "61234", []uint32{}, all},
		{"nobody with bfdd's capabilities", "nobody", own, all},
		{"nobody with frrvty as a process group only", "nobody", []uint32{uint32(vty)}, all},
		{"frr without CAP_SYS_ADMIN", "frr", own, noAdmin},
		{"frr without capabilities", "frr", own, nil},
		{"frr with bfdd's capabilities", "frr", own, all},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := osUsers{}.Lookup(c.user)
			if _, numeric := strconv.Atoi(c.user); numeric == nil {
				u = &user.User{Uid: c.user, Gid: c.user} // not in the database
			} else if err != nil {
				t.Fatal(err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			groups := c.groups
			if groups == nil {
				gids, _ := u.GroupIds()
				for _, g := range gids {
					n, _ := strconv.Atoi(g)
					groups = append(groups, uint32(n))
				}
			}
			id := identity{uid: uid}
			var ambient []uintptr
			for _, k := range c.caps {
				id.ambient |= 1 << k.bit
				ambient = append(ambient, uintptr(k.bit))
			}
			attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, AmbientCaps: ambient}
			as, predicted := id.plan(osUsers{})
			started, out := runBfddAs(t, ns, attr, u.Uid, u.Gid, as)
			t.Logf("plan: %v; bfdd: started=%v %s", predicted, started, out)
			if started != (predicted == nil) {
				t.Fatalf("plan says %v, the real bfdd started=%v: %s", predicted, started, out)
			}
		})
	}
}

// TestBGPBFDPrivilegesRoot: run as root (the lab, a root unit), edgelb
// starts bfdd as frr itself, with the capabilities bfdd keeps, and bfdd
// comes up as that user.
func TestBGPBFDPrivilegesRoot(t *testing.T) {
	netns.RequireRoot(t)
	as, err := currentIdentity().plan(osUsers{})
	if err != nil {
		t.Fatal(err)
	}
	if !as.switchTo || as.user != frrUser {
		t.Fatalf("root runs bfdd as %+v, want the frr user", as)
	}
	ns := netns.NewT(t, "elb-bfdr")
	dir, err := os.MkdirTemp("", "edgelb-bfdr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, as.uid, as.gid); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bfdd.conf"), []byte("!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{opts: Options{Binary: DefaultBinary, Dir: dir}, as: as}
	cmd := d.command()
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// Forked from the namespace's locked thread: bfdd binds its ports there.
	if err := ns.Do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "bfdd.vty")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bfdd did not come up in 30 s: %s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] != strconv.Itoa(as.uid) {
			t.Fatalf("bfdd runs as uid %s, want frr's %d", f[1], as.uid)
		}
	}
	t.Logf("root: bfdd started as %s (uid %d, groups %v), vty up", as.user, as.uid, as.groups)
}

// runBfddAs starts bfdd with attr's credentials and ambient capabilities
// (as systemd's User=, SupplementaryGroups= and AmbientCapabilities= set
// them, and as Start would pass -u/-g) and reports whether it came up (its
// vty socket appeared while it ran) or exited, with its output.
func runBfddAs(t *testing.T, ns *netns.NS, attr *syscall.SysProcAttr, uid, gid string, as runAs) (bool, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgelb-bfdp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bfdd.conf"), []byte("!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	user, group := as.user, as.group
	if user == "" { // refused by plan: -u/-g as Start would pass them
		user, group = uid, gid
	}
	d := &Daemon{opts: Options{Binary: DefaultBinary, Dir: dir}, as: runAs{user: user, group: group}}
	cmd := exec.Command(DefaultBinary, d.args()...)
	attr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = attr
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// Forked from the namespace's locked thread: bfdd binds its ports there.
	if err := ns.Do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case err := <-exited:
			return false, fmt.Sprintf("exited (%v): %s", err, lastLine(buf.String()))
		case <-ctx.Done():
			t.Fatalf("bfdd neither came up nor exited in 30 s: %s", buf.String())
		case <-tk.C:
			if _, err := os.Stat(filepath.Join(dir, "bfdd.vty")); err == nil {
				cmd.Process.Kill()
				<-exited
				return true, "its vty socket is up"
			}
		}
	}
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
