package statesync

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeConntrackd stands in for the binary: run without a command it is the
// daemon (writes its pid, sleeps); with one it is a client, logs the flag
// and answers -s with the stats testdata.
const fakeConntrackd = `#!/bin/sh
dir=$(dirname "$2")
if [ -z "$3" ]; then echo $$ > "$dir/daemon.pid"; echo "[Mon Nov 23 11:30:15 2026] (pid=$$) [notice] initialization completed"; exec sleep 60; fi
printf "%s\n" "$3" >> "$dir/calls"
if [ "$3" = "-s" ]; then cat "$dir/stats.txt"; fi
exit 0
`

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("no %s within 20 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The supervisor takes the backup steps once the daemon answers, the
// takeover steps on Gaining, restarts a daemon that died (and takes the
// steps of the role it has then), and parses the daemon's counters.
func TestConntrackdSupervision(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "conntrackd")
	if err := os.WriteFile(bin, []byte(fakeConntrackd), 0o755); err != nil {
		t.Fatal(err)
	}
	stats, err := os.ReadFile("testdata/stats.txt")
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "stats.txt"), stats, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Start(Options{Binary: bin, Dir: run, Interface: "eth2", Address: netip.MustParseAddr("10.0.0.1"),
		Peer: netip.MustParseAddr("10.0.0.2"), Port: 3780}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := func() string {
		b, _ := os.ReadFile(filepath.Join(run, "calls"))
		// -s are the readiness probes and the status reads: not steps.
		var out []string
		for _, l := range strings.Fields(string(b)) {
			if l != "-s" {
				out = append(out, l)
			}
		}
		return strings.Join(out, " ")
	}
	<-c.Ready()
	waitFor(t, "backup steps", func() bool { return calls() == "-t -n" })
	if err := c.Gaining(t.Context(), []netip.Addr{netip.MustParseAddr("192.0.2.1")}); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got != "-t -n -c -f -R -B" {
		t.Fatalf("steps after Gaining: %q", got)
	}
	// The counters come from the background reads (every PeerPoll).
	waitFor(t, "counters read", func() bool { return c.Status().Stats.External == 100 })
	st := c.Status()
	if !st.Running || st.Role != "primary" || st.Stats.External != 100 || st.Restarts != 0 || st.Errors != 0 {
		t.Fatalf("status %+v", st)
	}
	// The daemon dies: restarted after the backoff, and as a primary it
	// resyncs and bulk-sends at once.
	b, _ := os.ReadFile(filepath.Join(run, "daemon.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "restart", func() bool { return c.Status().Restarts == 1 && c.Status().Running })
	<-c.Ready()
	waitFor(t, "primary restart steps", func() bool { return calls() == "-t -n -c -f -R -B -R -B" })
	if st := c.Status(); st.Errors != 1 || !strings.Contains(st.LastError, "conntrackd exited") {
		t.Fatalf("the exit is not counted: %+v", st)
	}
	if err := c.Released(t.Context(), []netip.Addr{netip.MustParseAddr("192.0.2.1")}, 0); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got != "-t -n -c -f -R -B -R -B -t -n" {
		t.Fatalf("steps after Released: %q", got)
	}
	if c.Status().Role != "backup" {
		t.Fatal("still primary after releasing everything")
	}
}
