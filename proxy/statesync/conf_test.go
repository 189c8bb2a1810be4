package statesync

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	a4 = netip.MustParseAddr
)

// The generated file is compared whole with testdata: conntrackd's parser
// is strict and a changed line must be a reviewed change.
func TestRenderUnicast(t *testing.T) {
	got, err := Render(Options{Dir: "/run/edgelb/conntrackd", Interface: "eth2", Address: a4("10.0.0.1"), Peer: a4("10.0.0.2"), Port: 3780,
		Ignore: []netip.Addr{a4("10.0.0.1"), a4("2001:db8::1")}, CommitTimeout: DefaultCommitTimeout})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/unicast.conf", got)
}

// CommitTimeout: whole seconds rounded up; 0 writes none (conntrackd's own
// estimate).
func TestRenderCommitTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "", 1500 * time.Millisecond: "CommitTimeout 2", 3 * time.Hour: "CommitTimeout 10800"} {
		got, err := Render(Options{Dir: "/d", Interface: "e", Address: a4("10.0.0.1"), Peer: a4("10.0.0.2"), Port: 1, CommitTimeout: d})
		if err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, l := range strings.Split(got, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "CommitTimeout" {
				line = strings.Join(f, " ")
			}
		}
		if line != want {
			t.Errorf("CommitTimeout %v: line %q, want %q", d, line, want)
		}
	}
}

func TestRenderIPv6Peer(t *testing.T) {
	got, err := Render(Options{Dir: "/d", Interface: "eth2", Address: a4("fd00::1"), Peer: a4("fd00::2"), Port: 3780})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"IPv6_address fd00::1", "IPv6_Destination_Address fd00::2"} {
		if !strings.Contains(got, l) {
			t.Errorf("no %q in\n%s", l, got)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	for name, o := range map[string]Options{
		"no channel":      {Dir: "/d", Interface: "e", Address: a4("10.0.0.1"), Port: 1},
		"no address":      {Dir: "/d", Interface: "e", Peer: a4("10.0.0.2"), Port: 1},
		"mixed families":  {Dir: "/d", Interface: "e", Address: a4("10.0.0.1"), Peer: a4("fd00::2"), Port: 1},
		"no port":         {Dir: "/d", Interface: "e", Address: a4("10.0.0.1"), Peer: a4("10.0.0.2")},
		"no runtime dir ": {Interface: "e", Address: a4("10.0.0.1"), Peer: a4("10.0.0.2"), Port: 1},
	} {
		if _, err := Render(o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: Render = %v, want ErrOptions", name, err)
		}
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Render differs from %s:\n%s", path, got)
	}
}

// The steps are primary-backup.sh's, in its order; a gateway that still
// owns VIPs takes no backup step.
func TestSteps(t *testing.T) {
	if got := Takeover(); !slices.Equal(got, []Step{StepCommit, StepFlush, StepResync, StepBulk}) {
		t.Errorf("Takeover = %v", got)
	}
	if got := Release(0); !slices.Equal(got, []Step{StepShorten, StepRequest}) {
		t.Errorf("Release(0) = %v", got)
	}
	if got := Release(2); len(got) != 0 {
		t.Errorf("Release(2) = %v", got)
	}
	var flags []string
	for _, s := range append(Takeover(), Release(0)...) {
		flags = append(flags, s.Flag())
	}
	if strings.Join(flags, " ") != "-c -f -R -B -t -n" {
		t.Errorf("flags = %v", flags)
	}
}

func TestFakeTranscript(t *testing.T) {
	f := NewFake()
	v := []netip.Addr{a4("192.0.2.1")}
	f.Gaining(t.Context(), v)
	if f.Status().Role != "primary" {
		t.Errorf("role after gaining = %q", f.Status().Role)
	}
	f.Released(t.Context(), v, 0)
	f.Close()
	want := []string{"start shorten request", "gaining [192.0.2.1]: commit flush resync bulk",
		"released [192.0.2.1] (owning 0): shorten request", "closed"}
	if got := f.Transcript(); !slices.Equal(got, want) {
		t.Errorf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
