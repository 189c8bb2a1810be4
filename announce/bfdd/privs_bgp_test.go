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
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestBGPBFDPrivileges runs Debian's real bfdd under identities a gateway
// could give it and checks that plan (what Start and `edgelb check` use)
// predicts each outcome: started, or refused at start. The identities are
// set with setpriv(1) as systemd's User=, SupplementaryGroups= and
// AmbientCapabilities= would set them. bfdd runs in a namespace of the
// test's own (it binds the BFD ports).
func TestBGPBFDPrivileges(t *testing.T) {
	netns.RequireRoot(t)
	for _, bin := range []string{DefaultBinary, "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (lab/deps.sh bgp installs frr; setpriv is util-linux)", bin, err)
		}
	}
	ns := netns.NewT(t, "elb-bfdp")
	const all = "net_bind_service,net_raw,sys_admin"
	for _, c := range []struct {
		name, user, groups, caps string
	}{
		{"a uid /etc/passwd does not know (DynamicUser=yes)", "61234", "-", all},
		{"nobody with bfdd's capabilities", "nobody", "", all},
		{"nobody with frrvty as a process group only", "nobody", "frrvty", all},
		{"frr without CAP_SYS_ADMIN", "frr", "", "net_bind_service,net_raw"},
		{"frr without capabilities", "frr", "", ""},
		{"frr with bfdd's capabilities", "frr", "", all},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := osUsers{}.Lookup(c.user)
			if _, numeric := strconv.Atoi(c.user); numeric == nil {
				u = &user.User{Uid: c.user, Gid: c.user} // not in the database
			} else if err != nil {
				t.Fatal(err)
			}
			uid, _ := strconv.Atoi(u.Uid)
			id := identity{uid: uid}
			for _, name := range strings.Split(c.caps, ",") {
				for _, k := range bfddCaps {
					if name != "" && "CAP_"+strings.ToUpper(name) == k.name {
						id.ambient |= 1 << k.bit
					}
				}
			}
			as, predicted := id.plan(osUsers{})
			started, out := runBfddAs(t, ns, u.Uid, u.Gid, c.groups, c.caps, as)
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

// runBfddAs starts bfdd as uid:gid with the given process groups ("": the
// user's own, "-": none) and
// ambient capabilities and reports whether it came up (its vty socket
// appeared while it ran) or exited, with its output.
func runBfddAs(t *testing.T, ns *netns.NS, uid, gid, groups, caps string, as runAs) (bool, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgelb-bfdp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "bfdd.conf")
	if err := os.WriteFile(conf, []byte("!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	user, group := as.user, as.group
	if user == "" { // refused by plan: -u/-g as Start would pass them
		user, group = uid, gid
	}
	args := []string{"--reuid=" + uid, "--regid=" + gid}
	switch groups {
	case "": // the user's groups from the database
		args = append(args, "--init-groups")
	case "-": // a user the database does not know has none there
		args = append(args, "--clear-groups")
	default:
		args = append(args, "--groups="+groups)
	}
	if caps != "" {
		plus := "+" + strings.ReplaceAll(caps, ",", ",+")
		args = append(args, "--inh-caps="+plus, "--ambient-caps="+plus)
	}
	d := &Daemon{opts: Options{Binary: DefaultBinary, Dir: dir}, as: runAs{user: user, group: group}}
	args = append(append(args, DefaultBinary), d.args()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := ns.Command(ctx, "setpriv", args...)
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
