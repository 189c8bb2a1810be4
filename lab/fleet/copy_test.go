//go:build fleet

package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// TestFleetStoreCopy: a lone gateway's bbolt file (a pool and five
// services with their addresses, written by the engine) is moved into an
// empty etcd prefix with `edgelb store copy`; three gateways started on it
// show the same services with the same addresses, in their kernels too. A
// second copy into the now used prefix is refused.
func TestFleetStoreCopy(t *testing.T) {
	l := newLab(t)
	path := filepath.Join(l.dir, "lone", "edgelb.db")
	want := loneGateway(t, path)

	copyOut := func() (string, int) {
		var eps []string
		for i := range 3 {
			eps = append(eps, "http://"+memberAddr(i)+":2379")
		}
		p := startIn(t, l.gws[0], l.exe, "store", "copy", "--from", "bbolt:"+path, "--to", "etcd:"+strings.Join(eps, ","))
		select {
		case <-p.done:
		case <-time.After(2 * time.Minute): // a hang bound
			t.Fatal("store copy did not finish in 2 min")
		}
		return p.log.Tail(5), p.cmd.ProcessState.ExitCode()
	}
	out, code := copyOut()
	if code != 0 || !strings.Contains(out, "read back identical") {
		t.Fatalf("store copy: exit %d\n%s", code, out)
	}
	t.Logf("store copy: %s", out)
	for i := range 3 {
		l.startGateway(i)
	}
	for i := range 3 {
		l.waitReady(i, 60*time.Second)
	}
	got := l.converged(t)
	for name, ip := range want {
		if ips := got[name]; len(ips) != 1 || ips[0] != ip {
			t.Errorf("%s: the lone gateway had %s, the fleet shows %v", name, ip, ips)
		}
		for g := range 3 {
			if _, err := waitKernel(l.gws[g], ip, true, 10*time.Second); err != nil {
				t.Error(err)
			}
		}
	}
	out, code = copyOut()
	if code == 0 || !strings.Contains(out, "already holds") {
		t.Fatalf("a second copy into a used prefix: exit %d\n%s", code, out)
	}
	fmt.Printf("MEASURED fleet store_copy services=%d same_addresses=%v second_copy_refused=%v\n", len(want), !t.Failed(), code != 0)
}

// loneGateway writes a state file as a lone gateway's engine would.
func loneGateway(t *testing.T, path string) map[string]netip.Addr {
	t.Helper()
	b, err := store.OpenBolt(path, store.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := engine.NewEngine(b, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r, _ := lb.ParseRange(poolCIDR)
	if _, err := e.CreatePool(ctx, lb.Pool{Name: "fleet", AutoAssign: true, Ranges: []lb.Range{r}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]netip.Addr{}
	for i := range 5 {
		s := lb.ServiceSpec{Name: fmt.Sprintf("lone-%d", i), Pool: "fleet", Ports: []lb.PortSpec{{Port: 80, Protocol: proxy.TCP}},
			Backends: []lb.BackendSpec{{Addr: netip.MustParseAddr(backendAddr), Port: 8080, Weight: 1}}}
		if i == 3 {
			s.VIPs = []netip.Addr{netip.MustParseAddr("10.99.7.7")}
		}
		st, _, err := e.PutService(ctx, s)
		if err != nil || len(st.VIPs) != 1 {
			t.Fatalf("lone gateway: %v %v", st, err)
		}
		want[s.Name] = st.VIPs[0]
	}
	return want
}
