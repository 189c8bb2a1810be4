package syncd

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// kernelRules checks the rules every Kernel must obey (see Kernel). It runs
// on the Fake here and on the real kernel in the guest
// (TestIPVSGuestSyncDaemonRules), which is how the fake is kept honest.
// iface must exist in k's namespace; "nosuch0" must not.
func kernelRules(t *testing.T, k Kernel, iface string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	is := func(err error, want unix.Errno, what string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: got %v, want %v", what, err, want)
		}
	}
	if ds, err := k.List(); err != nil || len(ds) != 0 {
		t.Fatalf("start: want no daemon, got %+v %v", ds, err)
	}
	is(k.Stop(Master), unix.ESRCH, "stop a master that is not running")
	is(k.Start(Master, Params{Interface: "nosuch0", SyncID: 1}), unix.ENODEV, "start on a missing interface")
	is(k.Start(Role(3), Params{Interface: iface}), unix.EINVAL, "start state 3")
	must(k.Start(Master, Params{Interface: iface, SyncID: 9}))
	is(k.Start(Master, Params{Interface: iface, SyncID: 10}), unix.EEXIST, "a second master")
	must(k.Start(Backup, Params{Interface: iface, SyncID: 9, Port: 8850, TTL: 3}))
	is(k.Start(Backup, Params{Interface: iface}), unix.EEXIST, "a second backup")
	ds, err := k.List()
	must(err)
	if len(ds) != 2 {
		t.Fatalf("list: want master and backup, got %+v", ds)
	}
	for _, d := range ds {
		want := Params{Interface: iface, SyncID: 9, Group: DefaultGroup, Port: DefaultPort, TTL: DefaultTTL}
		if d.Role == Backup {
			want.Port, want.TTL = 8850, 3
		}
		if d.MaxLen == 0 {
			t.Errorf("%s: kernel reported no maxlen", d.Role)
		}
		d.MaxLen = 0
		if d.Params != want {
			t.Errorf("%s: got %+v, want %+v", d.Role, d.Params, want)
		}
	}
	must(k.Stop(Master))
	is(k.Stop(Master), unix.ESRCH, "stop the master twice")
	must(k.Stop(Backup))
	if ds, err := k.List(); err != nil || len(ds) != 0 {
		t.Fatalf("end: want no daemon, got %+v %v", ds, err)
	}
}

func TestFakeKernelRules(t *testing.T) { kernelRules(t, NewFake("sync0"), "sync0") }

func TestFakeRefusesNonMulticastGroup(t *testing.T) {
	f := NewFake("sync0")
	err := f.Start(Master, Params{Interface: "sync0", Group: netip.MustParseAddr("10.1.1.1")})
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("got %v", err)
	}
}

// syncerConverges checks Set/Get over a Kernel (the fake here, the real
// kernel in the guest).
func syncerConverges(t *testing.T, k Kernel, iface string) {
	t.Helper()
	ck := &countingKernel{Kernel: k}
	calls := func() int { return ck.n }
	s := Syncer{K: ck}
	both := Desired{Master: &Params{Interface: iface, SyncID: 5}, Backup: &Params{Interface: iface, SyncID: 5}}
	if err := s.Set(both); err != nil {
		t.Fatal(err)
	}
	st, err := s.Get()
	if err != nil || st.Master == nil || st.Backup == nil || st.Master.SyncID != 5 {
		t.Fatalf("after Set both: %+v %v", st, err)
	}
	n := calls()
	if err := s.Set(both); err != nil {
		t.Fatal(err)
	}
	if calls() != n {
		t.Fatalf("a converged Set made %d calls", calls()-n)
	}
	// A changed parameter restarts that role only.
	changed := Desired{Master: both.Master, Backup: &Params{Interface: iface, SyncID: 6}}
	if err := s.Set(changed); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Get()
	if st.Backup == nil || st.Backup.SyncID != 6 || st.Master == nil || st.Master.SyncID != 5 {
		t.Fatalf("after changing the backup: %+v", st)
	}
	// Master off.
	if err := s.Set(Desired{Backup: changed.Backup}); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Get()
	if st.Master != nil || st.Backup == nil {
		t.Fatalf("after master off: %+v", st)
	}
	if err := s.Set(Desired{}); err != nil {
		t.Fatal(err)
	}
	if st, _ = s.Get(); st.Master != nil || st.Backup != nil {
		t.Fatalf("after all off: %+v", st)
	}
}

func TestSyncerConvergesFake(t *testing.T) {
	f := NewFake("sync0")
	syncerConverges(t, f, "sync0")
}

func TestSyncerSetErrors(t *testing.T) {
	f := NewFake("sync0")
	s := Syncer{K: f}
	// Invalid parameters are refused before the kernel is asked.
	if err := s.Set(Desired{Master: &Params{Interface: ""}}); !errors.Is(err, ErrInvalid) || f.Calls != 0 {
		t.Fatalf("got %v, %d calls", err, f.Calls)
	}
	// A missing interface fails that role; the other role still converges.
	err := s.Set(Desired{Master: &Params{Interface: "gone0"}, Backup: &Params{Interface: "sync0"}})
	if !errors.Is(err, unix.ENODEV) {
		t.Fatalf("got %v", err)
	}
	if st, _ := s.Get(); st.Backup == nil || st.Master != nil {
		t.Fatalf("backup should run: %+v", st)
	}
	f.FailList = unix.EIO
	if err := s.Set(Desired{}); !errors.Is(err, unix.EIO) {
		t.Fatalf("got %v", err)
	}
}

func TestMatches(t *testing.T) {
	got := Params{Interface: "s", SyncID: 1, Group: DefaultGroup, Port: DefaultPort, TTL: 1, MaxLen: 1472}
	for _, c := range []struct {
		want Params
		ok   bool
	}{
		{Params{Interface: "s", SyncID: 1}, true},
		{Params{Interface: "s", SyncID: 1, MaxLen: 9000}, true}, // clamped by the kernel; not compared
		{Params{Interface: "s", SyncID: 2}, false},
		{Params{Interface: "t", SyncID: 1}, false},
		{Params{Interface: "s", SyncID: 1, Port: 8849}, false},
		{Params{Interface: "s", SyncID: 1, TTL: 2}, false},
		{Params{Interface: "s", SyncID: 1, Group: netip.MustParseAddr("239.0.0.1")}, false},
	} {
		if Matches(c.want, got) != c.ok {
			t.Errorf("Matches(%+v) = %v", c.want, !c.ok)
		}
	}
	// A kernel before 4.3 reports no group, port or ttl: taken as satisfied.
	if !Matches(Params{Interface: "s", Port: 1, TTL: 9}, Params{Interface: "s"}) {
		t.Error("unreported fields should match")
	}
}

// countingKernel counts the Start and Stop calls that reach a Kernel.
type countingKernel struct {
	Kernel
	n int
}

func (c *countingKernel) Start(r Role, p Params) error { c.n++; return c.Kernel.Start(r, p) }
func (c *countingKernel) Stop(r Role) error            { c.n++; return c.Kernel.Stop(r) }
