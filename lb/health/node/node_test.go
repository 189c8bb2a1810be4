package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/proxy"
)

var (
	vipA  = netip.MustParseAddr("192.0.2.10")
	node1 = netip.MustParseAddrPort("198.51.100.1:30080")
	node2 = netip.MustParseAddrPort("198.51.100.2:30080")
	node3 = netip.MustParseAddrPort("198.51.100.3:30080")
)

func backends(weight uint32, aps ...netip.AddrPort) []proxy.Backend {
	var out []proxy.Backend
	for _, ap := range aps {
		out = append(out, proxy.Backend{Addr: ap, Weight: weight})
	}
	return out
}

// nodeDesired is what the controller gives in nodeport mode for one
// Service "default/web" (port http) on vipA and its node port, both
// served by the given nodes.
func nodeDesired(nodes ...netip.AddrPort) lb.Desired {
	return lb.Desired{
		Dataplane: proxy.Config{Services: []proxy.Service{
			{Name: "default/web/http", VIP: vipA, Port: 80, Protocol: proxy.TCP, Backends: backends(1, nodes...)},
			{Name: "default/web/http/nodeport", NodePort: 30080, Protocol: proxy.TCP, Backends: backends(1, nodes...)},
		}},
		VIPs: []announce.VIP{{Addr: vipA, Pool: "p"}},
	}
}

func weights(s proxy.Service) map[netip.AddrPort]uint32 {
	out := map[netip.AddrPort]uint32{}
	for _, b := range s.Backends {
		out[b.Addr] = b.Weight
	}
	return out
}

func TestNodeTargets(t *testing.T) {
	d := nodeDesired(node1, node2)
	d.Dataplane.Services = append(d.Dataplane.Services,
		proxy.Service{Name: "default/dns/dns", NodePort: 30053, Protocol: proxy.UDP, Backends: backends(1, netip.MustParseAddrPort("198.51.100.1:30053"))},
		proxy.Service{Name: "default/old/nodeport", NodePort: 30081, Protocol: proxy.TCP,
			Backends: []proxy.Backend{{Addr: netip.MustParseAddrPort("198.51.100.1:30081"), Draining: true}}})
	hc := lb.HealthCheck{Type: "tcp", Interval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3}
	got := Targets(d.Dataplane, hc)
	want := []health.Target{{Service: "default/web/http", Backend: node1, Check: hc}, {Service: "default/web/http", Backend: node2, Check: hc}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("targets (one per node:port, no UDP, no draining):\n%+v\nwant\n%+v", got, want)
	}
}

func TestApplyDown(t *testing.T) {
	shared := func() lb.Desired { // a second Service on vipA, on other nodes
		d := nodeDesired(node1, node2)
		d.Dataplane.Services = append(d.Dataplane.Services, proxy.Service{Name: "default/api", VIP: vipA, Port: 443,
			Protocol: proxy.TCP, Backends: backends(1, node3)})
		return d
	}
	for _, tc := range []struct {
		name     string
		in       lb.Desired
		down     []netip.AddrPort
		withdraw bool
		weights  map[netip.AddrPort]uint32 // of every service on the nodes node1/node2
		vips     int
	}{
		{"none down", nodeDesired(node1, node2), nil, false, map[netip.AddrPort]uint32{node1: 1, node2: 1}, 1},
		{"one down", nodeDesired(node1, node2), []netip.AddrPort{node2}, false, map[netip.AddrPort]uint32{node1: 1, node2: 0}, 1},
		{"one down withdraw", nodeDesired(node1, node2), []netip.AddrPort{node2}, true, map[netip.AddrPort]uint32{node1: 1, node2: 0}, 1},
		{"all down keep", nodeDesired(node1, node2), []netip.AddrPort{node1, node2}, false, map[netip.AddrPort]uint32{node1: 1, node2: 1}, 1},
		{"all down withdraw", nodeDesired(node1, node2), []netip.AddrPort{node1, node2}, true, map[netip.AddrPort]uint32{node1: 0, node2: 0}, 0},
		{"all down withdraw, VIP shared with a live service", shared(), []netip.AddrPort{node1, node2}, true, map[netip.AddrPort]uint32{node1: 0, node2: 0}, 1},
		{"unknown backend down", nodeDesired(node1, node2), []netip.AddrPort{node3}, true, map[netip.AddrPort]uint32{node1: 1, node2: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprintf("%+v", tc.in)
			down := map[netip.AddrPort]bool{}
			for _, b := range tc.down {
				down[b] = true
			}
			out := applyDown(tc.in, down, tc.withdraw)
			for _, s := range out.Dataplane.Services[:2] {
				if got := weights(s); !reflect.DeepEqual(got, tc.weights) {
					t.Errorf("%s: weights %v, want %v", s.Name, got, tc.weights)
				}
			}
			if len(out.VIPs) != tc.vips {
				t.Errorf("VIPs %v, want %d", out.VIPs, tc.vips)
			}
			if after := fmt.Sprintf("%+v", tc.in); after != before {
				t.Errorf("input changed (the controller may share it):\n%s\n%s", before, after)
			}
		})
	}
	// A UDP service on the same node:port follows the TCP check; draining stays draining.
	d := nodeDesired(node1, node2)
	d.Dataplane.Services = append(d.Dataplane.Services, proxy.Service{Name: "default/dns", NodePort: 30080, Protocol: proxy.UDP,
		Backends: []proxy.Backend{{Addr: node1, Weight: 1}, {Addr: node2, Draining: true}}})
	out := applyDown(d, map[netip.AddrPort]bool{node1: true}, false)
	if got := out.Dataplane.Services[2].Backends; got[0].Weight != 1 || !got[1].Draining {
		// node1 is the UDP service's only backend in rotation: all down, kept.
		t.Errorf("udp backends %+v", got)
	}
	out = applyDown(d, map[netip.AddrPort]bool{node1: true}, true)
	if got := out.Dataplane.Services[2].Backends; got[0].Weight != 0 || !got[1].Draining {
		t.Errorf("udp backends (withdraw) %+v", got)
	}
}

func TestNodeHealthIgnoresStaleEvents(t *testing.T) {
	nh := NewFilter(Options{Check: lb.HealthCheck{Type: "tcp", Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}})
	nh.Apply(nodeDesired(node1))
	_ = nh.SetHealth(context.Background(), "x", node2, false) // not checked: a stopped probe
	if d := nh.Apply(nodeDesired(node1, node2)); weights(d.Dataplane.Services[0])[node2] != 1 {
		t.Fatal("a late event for a backend not under check took it out")
	}
	_ = nh.SetHealth(context.Background(), "x", node2, false)
	if d := nh.Apply(nodeDesired(node1, node2)); weights(d.Dataplane.Services[0])[node2] != 0 {
		t.Fatal("down backend kept its weight")
	}
	nh.Apply(nodeDesired(node1)) // node2 leaves: forgotten
	if d := nh.Apply(nodeDesired(node1, node2)); weights(d.Dataplane.Services[0])[node2] != 1 {
		t.Fatal("a backend that came back did not start healthy")
	}
}

// fakeNodes is the checker's dialer: a connect to a dead node is refused,
// to a live one it succeeds (over a pipe; no network).
type fakeNodes struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (f *fakeNodes) set(ap netip.AddrPort, dead bool) {
	f.mu.Lock()
	f.dead[ap.String()] = dead
	f.mu.Unlock()
}

var errRefused = errors.New("connection refused (fake)")

func (f *fakeNodes) dial(_ context.Context, _, addr string) (net.Conn, error) {
	f.mu.Lock()
	dead := f.dead[addr]
	f.mu.Unlock()
	if dead {
		return nil, errRefused
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

// TestNodeHealthWithChecker: the daemon's Kubernetes path with fakes — the
// controller's states → Filter → the effects' input, whose onDesired
// hook sets the checker's targets (Checker.Set). A node whose port refuses goes to weight 0 after fall
// failures, comes back after rise successes; with withdraw, the VIP is
// withdrawn while every node is down.
func TestNodeHealthWithChecker(t *testing.T) {
	nodes := &fakeNodes{dead: map[string]bool{}}
	hc := lb.HealthCheck{Type: "tcp", Interval: 10 * time.Millisecond, Timeout: 10 * time.Millisecond, Rise: 2, Fall: 2}
	nh := NewFilter(Options{Check: hc, Withdraw: true})
	checker := health.New(health.Options{Dialer: nodes.dial, OnChange: func(ev health.Event) {
		_ = nh.SetHealth(context.Background(), ev.Target.Service, ev.Target.Backend, ev.Healthy)
	}})
	defer checker.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, out := make(chan lb.Desired, 1), make(chan lb.Desired, 1)
	go nh.Run(ctx, in, out)

	// The effects loop's side, reduced: onDesired, then the state is the
	// one to apply.
	onDesired := func(d lb.Desired) { checker.Set(d.Health) }
	var mu sync.Mutex
	var last lb.Desired
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-out:
				onDesired(d)
				mu.Lock()
				last = d
				mu.Unlock()
			}
		}
	}()
	state := func() (map[netip.AddrPort]uint32, map[netip.AddrPort]uint32, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(last.Dataplane.Services) < 2 {
			return nil, nil, -1
		}
		return weights(last.Dataplane.Services[0]), weights(last.Dataplane.Services[1]), len(last.VIPs)
	}
	waitFor := func(what string, want map[netip.AddrPort]uint32, vips int) time.Duration {
		t.Helper()
		start := time.Now()
		eventually(t, what, func() bool {
			v, np, n := state()
			return reflect.DeepEqual(v, want) && reflect.DeepEqual(np, want) && n == vips
		})
		return time.Since(start)
	}

	in <- nodeDesired(node1, node2, node3)
	waitFor("all nodes in rotation", map[netip.AddrPort]uint32{node1: 1, node2: 1, node3: 1}, 1)
	if st := checker.Status(); len(st) != 3 || st[0].Service != "default/web/http" {
		t.Fatalf("checker targets %+v", st)
	}

	nodes.set(node2, true)
	took := waitFor("dead node at weight 0", map[netip.AddrPort]uint32{node1: 1, node2: 0, node3: 1}, 1)
	t.Logf("node %s out of rotation %v after its port started refusing (fall %d × interval %v)", node2, took, hc.Fall, hc.Interval)
	for _, s := range checker.Status() {
		if s.Backend == node2.String() && (s.Healthy || s.LastError == "") {
			t.Errorf("status of the dead node %+v", s)
		}
	}

	// A new controller state (e.g. another Service changed) keeps the dead node out.
	d := nodeDesired(node1, node2, node3)
	d.Dataplane.Services[0].Scheduler = proxy.RoundRobin
	in <- d
	// Wait for that state itself (its scheduler tells it from the last one,
	// which already had node2 out), then read its weights: no health event
	// follows that could correct a wrong output later.
	eventually(t, "the new state through the filter", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(last.Dataplane.Services) > 0 && last.Dataplane.Services[0].Scheduler == proxy.RoundRobin
	})
	if v, np, n := state(); !reflect.DeepEqual(v, map[netip.AddrPort]uint32{node1: 1, node2: 0, node3: 1}) ||
		!reflect.DeepEqual(np, v) || n != 1 {
		t.Fatalf("dead node after a new state: weights %v (node port %v), %d VIPs; want node2 still at 0", v, np, n)
	}

	nodes.set(node1, true)
	nodes.set(node3, true)
	waitFor("every node down: weights 0 and VIP withdrawn", map[netip.AddrPort]uint32{node1: 0, node2: 0, node3: 0}, 0)

	nodes.set(node1, false)
	nodes.set(node2, false)
	nodes.set(node3, false)
	took = waitFor("nodes back", map[netip.AddrPort]uint32{node1: 1, node2: 1, node3: 1}, 1)
	t.Logf("nodes back in rotation %v after their ports answered (rise %d × interval %v)", took, hc.Rise, hc.Interval)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) { // a hang guard
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
