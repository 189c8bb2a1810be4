package bfdd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Who bfdd runs as, and whether FRR lets it start.
//
// FRR 8.4's daemons check their identity at start (lib/privs.c,
// zprivs_init) and exit when a check fails. The supervisor then restarts
// bfdd forever, BGP stays up, and BFD protects nothing: the router learns
// of this gateway's death only when the hold time runs out. So edgelb
// checks what bfdd will check before starting it, and refuses with the
// reason (Start, and `edgelb check` through CheckPrivileges):
//   - the -u user must be a member of the vty group frrvty as
//     getgrouplist(3) sees it: by name, from the group database. The
//     process's own supplementary groups do not count, and a user the
//     database does not know (systemd's DynamicUser=yes) is refused;
//   - bfdd raises cap_net_bind_service, cap_net_raw and cap_sys_admin
//     with capset(2), so they must be in the permitted set it starts
//     with: for an edgelb that is not root, edgelb's ambient set;
//   - capset(2) itself must not be filtered away (systemd's
//     SystemCallFilter=~@privileged answers it with EPERM).
//
// Run as root, edgelb starts bfdd as the frr user itself (see command).
// The group database is read as edgelb is built (without cgo: the files
// /etc/passwd and /etc/group), so a user known only to another NSS source
// (LDAP) is reported unknown although FRR might find it.

// ErrPrivileges: bfdd would refuse to start with the identity edgelb can
// give it.
var ErrPrivileges = errors.New("bfdd (FRR) would refuse to start")

// vtyGroup is the group FRR's Debian build requires of its daemons' user.
const vtyGroup = "frrvty"

// DropIn is the package's example drop-in that lets the unit run bfdd
// (systemd/edgelb-bfd.conf; its header lists the steps).
const DropIn = "/usr/share/doc/edgelb/examples/edgelb-bfd.conf"

// frrUser is who a root edgelb runs bfdd as (Debian's frr package).
const frrUser = "frr"

// capability is one capability bit and its name for messages.
type capability struct {
	bit  uint
	name string
}

// bfddCaps are the capabilities bfdd asks for at start (FRR 8.4 bfdd's
// zebra_privs_t) and exits without.
var bfddCaps = []capability{
	{unix.CAP_NET_BIND_SERVICE, "CAP_NET_BIND_SERVICE"},
	{unix.CAP_NET_RAW, "CAP_NET_RAW"},
	{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},
}

// switchCaps are what a root edgelb needs to start bfdd as frr.
var switchCaps = []capability{{unix.CAP_SETUID, "CAP_SETUID"}, {unix.CAP_SETGID, "CAP_SETGID"}}

// runAs is the user bfdd runs as.
type runAs struct {
	user, group string // bfdd's -u and -g
	uid, gid    int
	groups      []uint32 // supplementary groups, from the group database
	// switchTo: edgelb (root) starts bfdd as this user (Credential).
	switchTo bool
}

// identity is what decides who bfdd runs as and whether it starts: who
// edgelb is and what it can hand on.
type identity struct {
	uid       int
	effective uint64 // CapEff
	ambient   uint64 // CapAmb
	capset    error  // the probe: a no-op capset(2)
}

// users is the group database (osUsers; a table in tests).
type users interface {
	LookupID(uid string) (*user.User, error)
	Lookup(name string) (*user.User, error)
	LookupGroup(name string) (*user.Group, error)
	LookupGroupID(gid string) (*user.Group, error)
	GroupIDs(u *user.User) ([]string, error)
}

type osUsers struct{}

func (osUsers) LookupID(uid string) (*user.User, error)       { return user.LookupId(uid) }
func (osUsers) Lookup(name string) (*user.User, error)        { return user.Lookup(name) }
func (osUsers) LookupGroup(name string) (*user.Group, error)  { return user.LookupGroup(name) }
func (osUsers) LookupGroupID(gid string) (*user.Group, error) { return user.LookupGroupId(gid) }
func (osUsers) GroupIDs(u *user.User) ([]string, error)       { return u.GroupIds() }

// CheckPrivileges says whether bfdd would start if this process ran it
// (nil), or why not (wrapping ErrPrivileges).
func CheckPrivileges() error {
	_, err := currentIdentity().plan(osUsers{})
	return err
}

// plan picks who bfdd runs as and checks it the way FRR will; all the
// problems are named at once.
func (id identity) plan(db users) (runAs, error) {
	var probs []string
	self, err := db.LookupID(strconv.Itoa(id.uid))
	if err != nil {
		return runAs{}, fmt.Errorf("%w: edgelb runs as uid %d, which /etc/passwd does not know (systemd DynamicUser=yes?): FRR checks its user's groups by name; under the packaged unit apply the drop-in %s", ErrPrivileges, id.uid, DropIn)
	}
	u := self
	switchTo := false
	if id.uid == 0 {
		if f, err := db.Lookup(frrUser); err == nil {
			u, switchTo = f, true
		}
	}
	ra := runAs{user: u.Username, switchTo: switchTo}
	ra.uid, _ = strconv.Atoi(u.Uid)
	ra.gid, _ = strconv.Atoi(u.Gid)
	ra.group = u.Gid
	if g, err := db.LookupGroupID(u.Gid); err == nil {
		ra.group = g.Name
	}
	gids, err := db.GroupIDs(u)
	if err != nil {
		probs = append(probs, fmt.Sprintf("cannot list the groups of user %q: %v", u.Username, err))
	}
	for _, g := range gids {
		if n, err := strconv.Atoi(g); err == nil {
			ra.groups = append(ra.groups, uint32(n))
		}
	}
	if vg, err := db.LookupGroup(vtyGroup); err != nil {
		probs = append(probs, fmt.Sprintf("group %s does not exist (Debian's frr package creates it)", vtyGroup))
	} else if !slices.Contains(gids, vg.Gid) {
		probs = append(probs, fmt.Sprintf("user %q is not in group %s (adduser %s %s)", u.Username, vtyGroup, u.Username, vtyGroup))
	}
	switch {
	case switchTo:
		if m := missing(id.effective, append(slices.Clone(switchCaps), bfddCaps...)); m != "" {
			probs = append(probs, "edgelb lacks "+m+" to start bfdd as "+frrUser)
		}
	case id.uid != 0:
		if m := missing(id.ambient, bfddCaps); m != "" {
			probs = append(probs, "edgelb's ambient capabilities lack "+m+" (bfdd inherits them; systemd AmbientCapabilities= and CapabilityBoundingSet=)")
		}
	}
	if id.capset != nil {
		probs = append(probs, fmt.Sprintf("the capset system call is refused (%v): a seccomp filter (systemd SystemCallFilter=~@privileged) blocks it", id.capset))
	}
	if len(probs) > 0 {
		return ra, fmt.Errorf("%w as user %q: %s", ErrPrivileges, u.Username, strings.Join(probs, "; "))
	}
	return ra, nil
}

// missing names the capabilities of want not in set.
func missing(set uint64, want []capability) string {
	var out []string
	for _, c := range want {
		if set&(1<<c.bit) == 0 {
			out = append(out, c.name)
		}
	}
	return strings.Join(out, ", ")
}

// currentIdentity reads this process's identity.
func currentIdentity() identity {
	id := identity{uid: os.Geteuid(), capset: capsetProbe()}
	id.effective, id.ambient = capSets()
	return id
}

// capSets reads CapEff and CapAmb from /proc/self/status (0 if unreadable).
func capSets() (eff, amb uint64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			continue
		}
		switch k {
		case "CapEff":
			eff = n
		case "CapAmb":
			amb = n
		}
	}
	return eff, amb
}

// capsetProbe sets this thread's capabilities to what they are: allowed
// to anyone, so an error means a seccomp filter refused the call — and
// would refuse bfdd's, which inherits the filter.
func capsetProbe() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	return unix.Capset(&hdr, &data[0])
}

// Unavailable is the Runner of a gateway where bfdd cannot run (err, from
// Start: ErrPrivileges): it runs nothing and answers every read with err,
// so each BFD peer shows StateUnavailable with the reason while BGP runs
// on without BFD — the failure reported on what failed, not a gateway
// that will not start.
func Unavailable(err error) Runner { return unavailable{err} }

type unavailable struct{ err error }

func (unavailable) Set(context.Context, []Session) error      { return nil }
func (u unavailable) States(context.Context) ([]State, error) { return nil, u.err }
func (unavailable) Close() error                              { return nil }
