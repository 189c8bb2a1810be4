package fake

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// randomConfig draws a Config from a small universe, so consecutive states
// share services, backends and node addresses and the diffs are partial.
func randomConfig(r *rand.Rand) proxy.Config {
	var cfg proxy.Config
	scheds := []proxy.Scheduler{"", proxy.RoundRobin, proxy.WeightedRoundRobin, proxy.SourceHash}
	for i := 0; i < 12; i++ {
		if r.IntN(3) == 0 {
			continue
		}
		s := proxy.Service{
			Name:      fmt.Sprintf("ns/svc-%d", i),
			Protocol:  []proxy.Protocol{proxy.TCP, proxy.UDP}[i%2],
			Scheduler: scheds[r.IntN(len(scheds))],
			Method:    []proxy.Method{"", proxy.NAT, proxy.NATNoSNAT}[r.IntN(3)],
		}
		if i%4 != 3 {
			s.VIP, s.Port = netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)}), 80
		}
		if i%3 == 0 || !s.VIP.IsValid() {
			s.NodePort = uint16(30000 + i)
		}
		if r.IntN(4) == 0 {
			s.Affinity = time.Duration(1+r.IntN(3)) * time.Minute
		}
		for j := 0; j < 5; j++ {
			if r.IntN(2) == 0 {
				continue
			}
			s.Backends = append(s.Backends, proxy.Backend{
				Addr:     netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(j + 1)}), 8080),
				Weight:   uint32(r.IntN(4)),
				Draining: r.IntN(5) == 0,
			})
		}
		cfg.Services = append(cfg.Services, s)
	}
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "2001:db8::1"} {
		if r.IntN(2) == 0 {
			cfg.NodeAddrs = append(cfg.NodeAddrs, netip.MustParseAddr(a))
		}
	}
	return cfg
}

// TestRandomStatesConverge cycles through random states: every Apply
// converges to exactly the Config's rendering, a repeated Apply writes
// nothing, and each write is needed (no object is written twice per Apply).
func TestRandomStatesConverge(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	d := New(Options{})
	for step := 0; step < 500; step++ {
		cfg := randomConfig(r)
		want, err := Render(cfg)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := d.Apply(ctx, cfg); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got := d.Transcript(); got != want {
			t.Fatalf("step %d: transcript\n%s\nwant\n%s", step, got, want)
		}
		ops := d.Ops()
		seen := map[string]bool{}
		for _, op := range ops {
			f := strings.Fields(op)
			id := strings.Join(f[1:min(len(f), 4)], " ")
			if seen[id] {
				t.Fatalf("step %d: %s written twice: %v", step, id, ops)
			}
			seen[id] = true
		}
		w := d.Writes()
		if err := d.Apply(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if d.Writes() != w || len(d.Ops()) != 0 {
			t.Fatalf("step %d: a repeated Apply wrote", step)
		}
	}
	t.Logf("500 random states, %d object writes", d.Writes())
}

// TestFailureAndDriftRepair: a failed Apply leaves a partial state that the
// next Apply or a Resync finishes; drift made behind the fake's back is
// repaired by Resync; Cleanup empties it.
func TestFailureAndDriftRepair(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	d := New(Options{})
	boom := errors.New("kernel said no")
	for step := 0; step < 200; step++ {
		cfg := randomConfig(r)
		want, _ := Render(cfg)
		d.FailNext(boom)
		if err := d.Apply(ctx, cfg); !errors.Is(err, boom) {
			t.Fatalf("step %d: want the injected error, got %v", step, err)
		}
		if step%2 == 0 {
			if err := d.Resync(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := d.Apply(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if got := d.Transcript(); got != want {
			t.Fatalf("step %d: not converged after the failure:\n%s\nwant\n%s", step, got, want)
		}
		d.Tamper(func(objs map[string]string) {
			for id := range objs {
				if r.IntN(3) == 0 {
					delete(objs, id)
				} else if r.IntN(3) == 0 {
					objs[id] = "weight=999"
				}
			}
			objs["backend 192.0.2.250:1/TCP 198.51.100.99:1"] = "weight=1"
		})
		if err := d.Resync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := d.Transcript(); got != want {
			t.Fatalf("step %d: resync did not repair:\n%s\nwant\n%s", step, got, want)
		}
	}
	if err := d.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.Transcript(); got != "" {
		t.Fatalf("after cleanup: %q", got)
	}
	if err := d.Resync(ctx); err != nil || d.Transcript() != "" {
		t.Fatalf("resync after cleanup brought back %q (%v)", d.Transcript(), err)
	}
}

func TestTranscriptAndOps(t *testing.T) {
	ctx := context.Background()
	d := New(NFTablesOptions)
	cfg := proxy.Config{
		NodeAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		Services: []proxy.Service{{
			Name: "web/http", VIP: netip.MustParseAddr("203.0.113.10"), Port: 80, Protocol: proxy.TCP, NodePort: 30080,
			Backends: []proxy.Backend{
				{Addr: netip.MustParseAddrPort("198.51.100.2:8080"), Weight: 1},
				{Addr: netip.MustParseAddrPort("198.51.100.3:8080"), Weight: 0, Draining: true},
			},
		}},
	}
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	want := `backend 203.0.113.10:80+nodeport:30080/TCP 198.51.100.2:8080 weight=1
backend 203.0.113.10:80+nodeport:30080/TCP 198.51.100.3:8080 weight=0 draining
nodeaddr 192.0.2.1
service 203.0.113.10:80+nodeport:30080/TCP name="web/http" sched=wrr method=nat affinity=0s
`
	if got := d.Transcript(); got != want {
		t.Errorf("transcript:\n%s\nwant\n%s", got, want)
	}
	d.Ops()
	cfg.Services[0].Backends[1].Weight = 2
	cfg.Services[0].Backends[1].Draining = false
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if ops := d.Ops(); len(ops) != 1 || ops[0] != "set backend 203.0.113.10:80+nodeport:30080/TCP 198.51.100.3:8080 weight=2" {
		t.Errorf("ops %q", ops)
	}

	// Refusals: nothing written, every bad service named.
	bad := cfg
	bad.Services = append(bad.Services, cfg.Services[0])
	lc := cfg.Services[0]
	lc.VIP, lc.NodePort, lc.Scheduler = netip.MustParseAddr("203.0.113.11"), 0, proxy.LeastConn
	dr := lc
	dr.VIP, dr.Scheduler, dr.Method = netip.MustParseAddr("203.0.113.12"), "", proxy.DirectRouting
	bad.Services = append(bad.Services, lc, dr)
	err := d.Apply(ctx, bad)
	if !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("want ErrUnsupported, got %v", err)
	}
	for _, s := range []string{"listed twice", "203.0.113.11:80/TCP", `"lc"`, "203.0.113.12:80/TCP", `"dr"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	if len(d.Ops()) != 0 {
		t.Error("a refused Config wrote")
	}
	if d.Close() != nil || !errors.Is(d.Apply(ctx, cfg), ErrClosed) {
		t.Error("Apply after Close")
	}
}
