package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/ipvs/syncd"
)

func TestIPVSSyncConvergesAndRepairs(t *testing.T) {
	f := syncd.NewFake("sync0")
	want := ipvsDesired(&config.IPVSSync{Interface: "sync0", SyncID: 3, MulticastGroup: netip.MustParseAddr("239.0.0.81")})
	closed := false
	x := startIPVSSync(f, func() error { closed = true; return nil }, want, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	c := &ipvsSyncCollector{x: x}
	expect := func(master, backup, errs int) {
		t.Helper()
		want := fmt.Sprintf(`# HELP edgelb_statesync_ipvs_daemon 1 while the kernel's IPVS sync daemon of this role runs (read back every 30 s).
# TYPE edgelb_statesync_ipvs_daemon gauge
edgelb_statesync_ipvs_daemon{role="backup"} %d
edgelb_statesync_ipvs_daemon{role="master"} %d
# HELP edgelb_statesync_ipvs_errors_total Failed attempts to bring the IPVS sync daemons to their configured state.
# TYPE edgelb_statesync_ipvs_errors_total counter
edgelb_statesync_ipvs_errors_total %d
`, backup, master, errs)
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Fatal(err)
		}
	}
	expect(1, 1, 0)
	st := x.Status()
	if len(st.Peers) != 2 || st.Peers[0].State != "running" || st.Peers[1].State != "running" ||
		!strings.Contains(st.Peers[0].Detail, "sync id 3, group 239.0.0.81 port 8848 ttl 1") {
		t.Fatalf("status: %+v", st)
	}
	// Stopped by hand: the next converge starts it again.
	if err := f.Stop(syncd.Master); err != nil {
		t.Fatal(err)
	}
	x.converge()
	if ds, _ := f.List(); len(ds) != 2 {
		t.Fatalf("master not restarted: %+v", ds)
	}
	// A failing kernel: counted, shown, and the last read state kept.
	f.FailList = unix.EIO
	x.converge()
	expect(1, 1, 1)
	if st := x.Status(); !strings.Contains(st.Peers[0].Detail, "last error") {
		t.Fatalf("status after a failure: %+v", st)
	}
	f.FailList = nil
	// Shutdown with withdraw stops the daemons and closes the socket.
	if err := x.Close(true); err != nil || !closed {
		t.Fatalf("close: %v closed=%v", err, closed)
	}
	if ds, _ := f.List(); len(ds) != 0 {
		t.Fatalf("daemons left running after Close(true): %+v", ds)
	}
}

func TestIPVSSyncMissingInterfaceRetried(t *testing.T) {
	f := syncd.NewFake() // the sync interface is not there yet
	x := startIPVSSync(f, func() error { return nil }, ipvsDesired(&config.IPVSSync{Interface: "sync0", SyncID: 1}),
		slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	defer x.Close(false)
	st := x.Status()
	if st.Peers[0].State != "stopped" || !strings.Contains(st.Peers[0].Detail, "no such device") {
		t.Fatalf("status: %+v", st)
	}
	if !errors.Is(x.lastErr, unix.ENODEV) {
		t.Fatalf("lastErr %v", x.lastErr)
	}
}
