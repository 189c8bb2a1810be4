//go:build k8s

package k8s

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// TestK8sOwnAddresses (issue 36), real kube-apiserver: the controller's
// stream through this gateway's OwnFilter, as the daemon wires it. Three
// auto-assigned Services; then a's VIP and c's endpoint become this
// gateway's own addresses (SetOwnAddrs, as the netlink watch calls it):
// a and c leave the programmed state, each with one DataplaneRefused
// Warning naming the address, b stays exactly as it was, no address is
// released and the pool stays Valid; a Service requesting an own address
// is refused. The addresses go: a and c are programmed again.
func TestK8sOwnAddresses(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "main", true, "192.0.2.0/28")
	r := e.start(t, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leadership", r.c.IsLeader)
	const ns = "apps"
	wait := 10 * time.Second

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := NewOwnFilter(nil, r.c.SetOwnRefused)
	out := make(chan lb.Desired, 1)
	go f.Run(ctx, r.c.Subscribe(), out)
	var last lb.Desired
	latest := func() lb.Desired {
		select {
		case last = <-out:
		default:
		}
		return last
	}
	svcsOf := func(d lb.Desired, name string) []proxy.Service {
		var s []proxy.Service
		for _, x := range d.Dataplane.Services {
			if serviceKey(x.Name) == ns+"/"+name {
				s = append(s, x)
			}
		}
		return s
	}
	announced := func(d lb.Desired, vip string) bool {
		return slices.ContainsFunc(d.VIPs, func(v announce.VIP) bool { return v.Addr.String() == vip })
	}

	e.svc(t, ns, "a")
	vipA := e.waitAny(t, ns, "a", 1, wait)[0]
	e.svc(t, ns, "b")
	vipB := e.waitAny(t, ns, "b", 1, wait)[0]
	e.svc(t, ns, "c")
	vipC := e.waitAny(t, ns, "c", 1, wait)[0]
	sl := slice("c", discoveryv1.AddressTypeIPv4, 8080, ep{addr: "10.1.0.5", node: "n1", ready: true})
	sl.Namespace = ns
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, wait, "a, b and c programmed and announced (c with its endpoint)", func() bool {
		d := latest()
		c := svcsOf(d, "c")
		return len(svcsOf(d, "a")) == 1 && len(svcsOf(d, "b")) == 1 && len(c) == 1 && len(c[0].Backends) == 1 &&
			announced(d, vipA) && announced(d, vipB) && announced(d, vipC)
	})
	bBefore := svcsOf(latest(), "b")
	t.Logf("assigned: a %s, b %s, c %s (endpoint 10.1.0.5:8080)", vipA, vipB, vipC)

	own := lb.NewOwnAddrs()
	own.Add(netip.MustParseAddr(vipA), "interface gw0")
	own.Add(netip.MustParseAddr("10.1.0.5"), "interface gw1")
	own.Add(netip.MustParseAddr("192.0.2.13"), "interface gw0")
	t0 := time.Now()
	if err := r.c.SetOwnAddrs(e.ctx, own); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOwnAddrs(e.ctx, own); err != nil {
		t.Fatal(err)
	}
	// a's VIP is own: a is left out whole. c's only endpoint is own: c is
	// programmed without it (and still announced).
	cBackends := func(d lb.Desired) int {
		n := 0
		for _, s := range svcsOf(d, "c") {
			n += len(s.Backends)
		}
		return n
	}
	waitUntil(t, wait, "a left out, c without its endpoint", func() bool {
		d := latest()
		return len(svcsOf(d, "a")) == 0 && !announced(d, vipA) && len(svcsOf(d, "c")) == 1 && cBackends(d) == 0 && announced(d, vipC)
	})
	took := time.Since(t0)
	d := latest()
	if got := svcsOf(d, "b"); !slices.EqualFunc(got, bBefore, func(x, y proxy.Service) bool {
		return x.Name == y.Name && x.VIP == y.VIP && slices.Equal(x.Backends, y.Backends)
	}) || !announced(d, vipB) {
		t.Errorf("b changed: %+v, was %+v", got, bBefore)
	}
	evA := e.waitEvent(t, ns, "a", corev1.EventTypeWarning, ReasonRefused, "VIP "+vipA+" is this gateway's own address (interface gw0)", wait)
	evC := e.waitEvent(t, ns, "c", corev1.EventTypeWarning, ReasonRefused, "programmed without backend(s) that are this gateway's own address: 10.1.0.5 (interface gw1)", wait)
	t.Logf("MEASURED own-address hit: a out of the programmed state and c without its endpoint %s after SetOwnAddrs (load %s)", took.Round(time.Millisecond), netns.Loadavg())
	t.Logf("a: Warning %s %q", evA.Reason, evA.Message)
	t.Logf("c: Warning %s %q", evC.Reason, evC.Message)
	for _, ev := range e.events(ns, "b") {
		if ev.Type == corev1.EventTypeWarning {
			t.Errorf("b got a Warning: %s %q", ev.Reason, ev.Message)
		}
	}
	for name, want := range map[string]string{"a": vipA, "b": vipB, "c": vipC} {
		if got := e.ingress(ns, name); len(got) != 1 || got[0] != want {
			t.Errorf("%s ingress %v, want %s (nothing released)", name, got, want)
		}
	}
	// A request for an own address, against the current set.
	e.svc(t, ns, "req", ann(AnnotationIPs, "192.0.2.13"))
	evR := e.waitEvent(t, ns, "req", corev1.EventTypeWarning, ReasonFailed, "192.0.2.13", wait)
	if !strings.Contains(evR.Message, "own address") {
		t.Errorf("req: %q", evR.Message)
	}
	t.Logf("req (192.0.2.13, an own address): Warning %s %q", evR.Reason, evR.Message)
	// The pool in use stays valid (status written by the leader).
	waitUntil(t, wait, "pool main Valid", func() bool {
		_, _, valid, _ := e.poolStatus(t, "main")
		return valid == "True"
	})

	t0 = time.Now()
	if err := r.c.SetOwnAddrs(e.ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOwnAddrs(e.ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, wait, "a and c programmed again", func() bool {
		d := latest()
		return len(svcsOf(d, "a")) == 1 && len(svcsOf(d, "c")) == 1 && cBackends(d) == 1 && announced(d, vipA) && announced(d, vipC)
	})
	t.Logf("MEASURED own-address gone: a and c programmed again %s after SetOwnAddrs", time.Since(t0).Round(time.Millisecond))
	waitUntil(t, wait, "the refusals cleared", func() bool {
		var n int
		r.c.do(func(k *keeper) { n = len(k.refused) })
		return n == 0
	})
	for name, want := range map[string]string{"a": vipA, "b": vipB, "c": vipC} {
		if got := e.ingress(ns, name); len(got) != 1 || got[0] != want {
			t.Errorf("%s ingress %v at the end, want %s (nothing released)", name, got, want)
		}
	}
	for _, name := range []string{"a", "c"} {
		n := 0
		for _, ev := range e.events(ns, name) {
			if ev.Reason == ReasonRefused {
				n += int(max(ev.Count, 1))
			}
		}
		if n != 1 {
			t.Errorf("%s: %d refusal Warnings, want 1", name, n)
		}
	}
}
