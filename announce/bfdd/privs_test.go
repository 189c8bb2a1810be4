package bfdd

import (
	"errors"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// dbUser is one /etc/passwd line and the groups /etc/group gives it.
type dbUser struct {
	u      user.User
	groups []string
}

// tableDB is a group database held in memory.
type tableDB struct {
	users  []dbUser
	groups []user.Group
}

func (t tableDB) find(f func(dbUser) bool) (*user.User, error) {
	for _, u := range t.users {
		if f(u) {
			c := u.u
			return &c, nil
		}
	}
	return nil, user.UnknownUserError("x")
}

func (t tableDB) LookupID(uid string) (*user.User, error) {
	return t.find(func(u dbUser) bool { return u.u.Uid == uid })
}

func (t tableDB) Lookup(name string) (*user.User, error) {
	return t.find(func(u dbUser) bool { return u.u.Username == name })
}

func (t tableDB) LookupGroup(name string) (*user.Group, error) {
	for _, g := range t.groups {
		if g.Name == name {
			return &g, nil
		}
	}
	return nil, user.UnknownGroupError(name)
}

func (t tableDB) LookupGroupID(gid string) (*user.Group, error) {
	for _, g := range t.groups {
		if g.Gid == gid {
			return &g, nil
		}
	}
	return nil, user.UnknownGroupIdError(gid)
}

func (t tableDB) GroupIDs(u *user.User) ([]string, error) {
	for _, x := range t.users {
		if x.u.Username == u.Username {
			return x.groups, nil
		}
	}
	return nil, user.UnknownUserError(u.Username)
}

// debian: root, frr (in frrvty), edgelb (a system user, optionally in
// frrvty), and the groups.
func debian(edgelbInVty bool) tableDB {
	eg := []string{"998"}
	if edgelbInVty {
		eg = append(eg, "86")
	}
	return tableDB{
		users: []dbUser{
			{user.User{Uid: "0", Gid: "0", Username: "root"}, []string{"0"}},
			{user.User{Uid: "100", Gid: "101", Username: "frr"}, []string{"101", "86"}},
			{user.User{Uid: "998", Gid: "998", Username: "edgelb"}, eg},
		},
		groups: []user.Group{{Gid: "0", Name: "root"}, {Gid: "101", Name: "frr"}, {Gid: "86", Name: "frrvty"}, {Gid: "998", Name: "edgelb"}},
	}
}

func caps(cs ...capability) uint64 {
	var m uint64
	for _, c := range cs {
		m |= 1 << c.bit
	}
	return m
}

// The cases FRR's zprivs_init decides (see privs.go), as the packaged unit
// and its variants would present them.
func TestPlan(t *testing.T) {
	all := caps(append(slices.Clone(switchCaps), bfddCaps...)...)
	unitCaps := caps(capability{12, "CAP_NET_ADMIN"}, bfddCaps[1]) // the unit: CAP_NET_ADMIN CAP_NET_RAW
	bfdCaps := caps(bfddCaps...) | unitCaps
	eperm := syscall.EPERM
	for _, c := range []struct {
		name string
		id   identity
		db   tableDB
		as   runAs  // when it may start
		want string // each part of the error; "" = starts
	}{
		{"root with frr: started as frr", identity{uid: 0, effective: all}, debian(false),
			runAs{user: "frr", group: "frr", uid: 100, gid: 101, groups: []uint32{101, 86}, switchTo: true}, ""},
		{"root, frr's package absent", identity{uid: 0, effective: all},
			tableDB{users: debian(false).users[:1], groups: debian(false).groups[:1]}, runAs{},
			"group frrvty does not exist"},
		{"root without CAP_SETUID (bounding set)", identity{uid: 0, effective: caps(bfddCaps...)}, debian(false), runAs{},
			"edgelb lacks CAP_SETUID, CAP_SETGID to start bfdd as frr"},
		{"the packaged unit: DynamicUser=yes", identity{uid: 61234, ambient: unitCaps, capset: eperm}, debian(false), runAs{},
			"uid 61234, which /etc/passwd does not know"},
		{"a system user, not in frrvty, the unit's capabilities and filter", identity{uid: 998, ambient: unitCaps, capset: eperm}, debian(false), runAs{},
			`user "edgelb" is not in group frrvty (adduser edgelb frrvty)|lack CAP_NET_BIND_SERVICE, CAP_SYS_ADMIN|capset system call is refused (operation not permitted)`},
		{"a system user in frrvty, the unit's capabilities", identity{uid: 998, ambient: unitCaps}, debian(true), runAs{},
			"lack CAP_NET_BIND_SERVICE, CAP_SYS_ADMIN"},
		{"a system user in frrvty, capset filtered", identity{uid: 998, ambient: bfdCaps, capset: eperm}, debian(true), runAs{},
			"capset system call is refused"},
		{"a system user in frrvty with bfdd's capabilities", identity{uid: 998, ambient: bfdCaps}, debian(true),
			runAs{user: "edgelb", group: "edgelb", uid: 998, gid: 998, groups: []uint32{998, 86}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			as, err := c.id.plan(c.db)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(as.groups, c.as.groups) || as.user != c.as.user || as.group != c.as.group ||
					as.uid != c.as.uid || as.gid != c.as.gid || as.switchTo != c.as.switchTo {
					t.Fatalf("runs as %+v, want %+v", as, c.as)
				}
				return
			}
			if !errors.Is(err, ErrPrivileges) {
				t.Fatalf("err = %v, want ErrPrivileges", err)
			}
			for _, part := range strings.Split(c.want, "|") {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			t.Log(err)
		})
	}
}

// This process's identity as read: the tests run as root with every
// capability, and nothing filters capset.
func TestCurrentIdentity(t *testing.T) {
	id := currentIdentity()
	if id.capset != nil {
		t.Fatalf("capset probe: %v", id.capset)
	}
	if id.uid == 0 && id.effective&(1<<bfddCaps[2].bit) == 0 {
		t.Fatalf("root without CAP_SYS_ADMIN in CapEff %x", id.effective)
	}
}
