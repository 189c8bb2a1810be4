//go:build netns

package node

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/effects"
	"github.com/edgelb/edgelb/lb/health"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// appliedDP records when each Config reached the kernel.
type appliedDP struct {
	proxy.Dataplane
	mu   sync.Mutex
	last proxy.Config
	at   time.Time
}

func (a *appliedDP) Apply(ctx context.Context, c proxy.Config) error {
	err := a.Dataplane.Apply(ctx, c)
	if err == nil {
		a.mu.Lock()
		a.last, a.at = c, time.Now()
		a.mu.Unlock()
	}
	return err
}

// weightIn is the weight of backend in the last applied Config (-1: absent).
func (a *appliedDP) weightIn(backend netip.AddrPort) (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.last.Services {
		for _, b := range s.Backends {
			if b.Addr == backend {
				return int(b.Weight), a.at
			}
		}
	}
	return -1, a.at
}

type attempt struct {
	start time.Time
	err   error
}

// TestNetnsNodeHealth: the Kubernetes nodeport path after the controller —
// Filter → lb/effects (OnDesired: Checker.Set) → the nftables
// dataplane in a gateway namespace — with three "nodes" (the demo lab's
// backends stand for node:nodePort). One node loses its link (a dead node:
// no RST, the TCP check times out) under a client opening a connection every
// 20 ms; it is at weight 0 in the kernel after about fall × interval, every
// connection opened after that succeeds, and it is back after rise checks.
func TestNetnsNodeHealth(t *testing.T) {
	netns.RequireRoot(t)
	l, err := demo.New(demo.Options{Prefix: netns.Unique("nh")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	// No announcer here: the client reaches the VIP through the gateway by route.
	if err := l.Client.AddRoute(netip.PrefixFrom(demo.VIP, 32), demo.GatewayFront.Addr()); err != nil {
		t.Fatal(err)
	}
	nd, err := nft.New(nft.Options{NetNS: int(l.Gateway.Handle())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = nd.Cleanup(ctx)
		nd.Close()
	})
	dp := &appliedDP{Dataplane: nd}

	hc := lb.HealthCheck{Type: "tcp", Interval: 200 * time.Millisecond, Timeout: 150 * time.Millisecond, Rise: 2, Fall: 3}
	nh := NewFilter(Options{Check: hc})
	checker := health.New(health.Options{Dialer: l.Gateway.DialContext, OnChange: func(ev health.Event) {
		_ = nh.SetHealth(context.Background(), ev.Target.Service, ev.Target.Backend, ev.Healthy)
	}})
	defer checker.Close()
	fx := effects.New(effects.Options{Dataplane: dp, Resync: time.Hour, OnDesired: func(d lb.Desired) { checker.Set(d.Health) }})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, out := make(chan lb.Desired, 1), make(chan lb.Desired, 1)
	ready := make(chan struct{})
	go nh.Run(ctx, in, out)
	go fx.Run(ctx, out, func() { close(ready) })

	var nodes []netip.AddrPort
	for _, b := range l.Backends {
		nodes = append(nodes, b.Addr)
	}
	in <- lb.Desired{Dataplane: proxy.Config{Services: []proxy.Service{{Name: "default/web/http", VIP: demo.VIP, Port: 80,
		Protocol: proxy.TCP, Scheduler: proxy.RoundRobin, Method: proxy.NAT, Backends: backends(1, nodes...)}}}}
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("dataplane did not converge")
	}
	eventually(t, "three nodes checked and healthy", func() bool {
		st := checker.Status()
		return len(st) == 3 && st[0].Checks >= 2 && st[0].Healthy && st[1].Healthy && st[2].Healthy
	})

	// A client opening a new connection every 20 ms.
	var mu sync.Mutex
	var tries []attempt
	// A connection to the dead node times out; the 5 s keeps a busy
	// machine's slow answer from a live one from counting as a failure.
	httpc := l.Client.HTTPClient(5 * time.Second)
	url := "http://" + netip.AddrPortFrom(demo.VIP, 80).String() + "/"
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	go func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-tk.C:
			}
			wg.Add(1)
			go func(start time.Time) {
				defer wg.Done()
				_, err := l.Get(loadCtx, httpc, url)
				if loadCtx.Err() != nil {
					return
				}
				mu.Lock()
				tries = append(tries, attempt{start, err})
				mu.Unlock()
			}(time.Now())
		}
	}()
	defer func() { stopLoad(); wg.Wait() }()
	count := func(from, to time.Time) (ok, failed int) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range tries {
			if a.start.Before(from) || !a.start.Before(to) {
				continue
			}
			if a.err != nil {
				failed++
			} else {
				ok++
			}
		}
		return
	}
	time.Sleep(time.Second)
	if ok, failed := count(time.Time{}, time.Now()); ok == 0 || failed != 0 {
		t.Fatalf("before the kill: %d ok, %d failed", ok, failed)
	}

	victim := l.Backends[1]
	link, err := victim.NS.Netlink().LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	kill := time.Now()
	if err := victim.NS.Netlink().LinkSetDown(link); err != nil {
		t.Fatal(err)
	}
	var outAt time.Time
	// A minute bounds a hang; how long it took is the figure below.
	for end := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		w, at := dp.weightIn(victim.Addr)
		outAt = at
		if w == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the dead node not at weight 0 in the kernel a minute after its link went down")
		}
	}
	time.Sleep(3 * time.Second)
	after := time.Now()
	okDuring, failDuring := count(kill, outAt)
	okAfter, failAfter := count(outAt, after)
	expect := time.Duration(hc.Fall) * hc.Interval
	t.Logf("node %s link down → weight 0 in the nftables dataplane after %v (fall × interval = %v; the first failing check starts up to one interval after the kill, and times out after %v)",
		victim.Addr, outAt.Sub(kill).Round(time.Millisecond), expect, hc.Timeout)
	t.Logf("connections opened kill → out: %d ok, %d failed; out → +3 s: %d ok, %d failed", okDuring, failDuring, okAfter, failAfter)
	if failAfter != 0 || okAfter < 50 {
		t.Errorf("after the node was out: %d ok, %d failed (want every one to succeed)", okAfter, failAfter)
	}
	t.Logf("MEASURED node health: link down → weight 0 in the kernel %v (fall × interval = %v, + up to one interval and one timeout %v); load %s",
		outAt.Sub(kill).Round(time.Millisecond), expect, hc.Interval+hc.Timeout, netns.Loadavg())
	for _, s := range checker.Status() {
		if s.Backend == victim.Addr.String() {
			t.Logf("health status of the dead node: healthy=%v failures=%d lastError=%q", s.Healthy, s.Failures, s.LastError)
		}
	}

	up := time.Now()
	if err := victim.NS.Netlink().LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	var backAt time.Time
	eventually(t, "the node back at weight 1", func() bool {
		w, at := dp.weightIn(victim.Addr)
		backAt = at
		return w == 1
	})
	t.Logf("node link up → weight 1 again after %v (rise × interval = %v)", backAt.Sub(up).Round(time.Millisecond),
		time.Duration(hc.Rise)*hc.Interval)
}
