package k8s

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func ownSet(addrs ...string) *lb.OwnAddrs {
	o := lb.NewOwnAddrs()
	for _, a := range addrs {
		o.Add(netip.MustParseAddr(a), "interface gw0")
	}
	return o
}

func names(d lb.Desired) (svcs, vips []string) {
	for _, s := range d.Dataplane.Services {
		svcs = append(svcs, s.Name)
	}
	for _, v := range d.VIPs {
		vips = append(vips, v.Addr.String())
	}
	return svcs, vips
}

// TestOwnFilterApply (issue 36): a Service whose VIP is an own address is
// left out whole (every port, its node port too) and its VIP not
// announced; one whose backend is (this gateway is a Node, or runs a
// hostNetwork endpoint) is programmed without that backend and reported;
// the others are untouched and the input is not modified.
func TestOwnFilterApply(t *testing.T) {
	ap := netip.MustParseAddrPort
	a := netip.MustParseAddr
	be := func(s string) []proxy.Backend { return []proxy.Backend{{Addr: ap(s), Weight: 1}} }
	d := lb.Desired{
		Dataplane: proxy.Config{Services: []proxy.Service{
			{Name: "default/a/http", VIP: a("192.0.2.1"), Port: 80, Backends: be("10.0.0.1:8080")},
			{Name: "default/a/dns", VIP: a("192.0.2.1"), Port: 53, Backends: be("10.0.0.1:53")},
			{Name: "default/a/http/nodeport", NodePort: 30080, Backends: be("10.0.0.1:8080")},
			{Name: "default/b/http", VIP: a("192.0.2.2"), Port: 80, Backends: be("10.0.0.2:8080")},
			{Name: "default/c/http", VIP: a("192.0.2.2"), Port: 81, Backends: be("198.51.100.1:8080")},
			{Name: "other/d/http", VIP: a("192.0.2.4"), Port: 80, Backends: be("10.0.0.4:8080")},
		}},
		VIPs:   []announce.VIP{{Addr: a("192.0.2.1")}, {Addr: a("192.0.2.2")}, {Addr: a("192.0.2.4")}},
		Health: []lb.HealthTarget{{Service: "default/a/http", Backend: ap("10.0.0.1:8080")}, {Service: "other/d/http", Backend: ap("10.0.0.4:8080")}},
	}
	before, _ := names(d)
	f := NewOwnFilter(ownSet("192.0.2.1", "198.51.100.1"), nil)
	got, hit := f.Apply(d)
	svcs, vips := names(got)
	if want := []string{"default/b/http", "default/c/http", "other/d/http"}; !slices.Equal(svcs, want) {
		t.Errorf("services %v, want %v", svcs, want)
	}
	if want := []string{"192.0.2.2", "192.0.2.4"}; !slices.Equal(vips, want) {
		t.Errorf("VIPs %v, want %v", vips, want)
	}
	if len(got.Health) != 1 || got.Health[0].Service != "other/d/http" {
		t.Errorf("health targets %+v", got.Health)
	}
	if len(hit) != 2 || !strings.HasPrefix(hit["default/a"], "not programmed: VIP 192.0.2.1 is this gateway's own address (interface gw0)") ||
		hit["default/c"] != "programmed without backend(s) that are this gateway's own address: 198.51.100.1 (interface gw0)" {
		t.Errorf("hit %v", hit)
	}
	for _, s := range got.Dataplane.Services {
		if s.Name == "default/c/http" && len(s.Backends) != 0 {
			t.Errorf("default/c/http kept backends %v", s.Backends)
		}
	}
	if len(d.Dataplane.Services[4].Backends) != 1 {
		t.Errorf("the input's backends changed: %v", d.Dataplane.Services[4].Backends)
	}
	if after, _ := names(d); !slices.Equal(after, before) {
		t.Errorf("the input changed: %v", after)
	}
	// Without own addresses the state passes as it is.
	f.SetOwnAddrs(context.Background(), nil)
	if got, hit := f.Apply(d); len(hit) != 0 || len(got.Dataplane.Services) != 6 {
		t.Errorf("empty set: %d services, hit %v", len(got.Dataplane.Services), hit)
	}
}

// TestControllerOwnAddresses (issue 36), on client-go's fakes: the
// controller's stream through an OwnFilter. Two auto-assigned Services;
// one's VIP becomes an own address (SetOwnAddrs on both): it leaves the
// filtered state with one DataplaneRefused Warning naming the address, the
// other stays, nothing is released and the pool stays valid; a new IPPool
// holding an own address is rejected against the current set. The address
// goes: the Service is back and the refusal cleared.
func TestControllerOwnAddresses(t *testing.T) {
	c, cs, _, ctx := leadingFake(t, prometheus.NewRegistry(), poolObj("p", 0, "192.0.2.0/29"))
	f := NewOwnFilter(nil, c.SetOwnRefused)
	out := make(chan lb.Desired, 1)
	go f.Run(ctx, c.Subscribe(), out)
	var last lb.Desired
	latest := func() lb.Desired {
		select {
		case last = <-out:
		default:
		}
		return last
	}
	for _, n := range []string{"s0", "s1"} {
		if _, err := cs.CoreV1().Services("default").Create(ctx, lbService(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress := func(name string) string {
		s, err := cs.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
	waitFor(t, 30*time.Second, "both Services assigned and programmed", func() bool {
		_, vips := names(latest())
		return ingress("s0") != "" && ingress("s1") != "" && len(vips) == 2
	})
	vip0, vip1 := ingress("s0"), ingress("s1")
	programmed := func(d lb.Desired, svc, vip string) bool {
		svcs, vips := names(d)
		return slices.Contains(svcs, "default/"+svc+"/http") && slices.Contains(vips, vip)
	}
	warnings := func() []string {
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		var out []string
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == ReasonRefused {
				out = append(out, e.InvolvedObject.Name+": "+e.Message)
			}
		}
		return out
	}

	own := ownSet(vip0, "198.51.100.7")
	if err := c.SetOwnAddrs(ctx, own); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOwnAddrs(ctx, own); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "s0 left out, s1 programmed", func() bool {
		d := latest()
		return !programmed(d, "s0", vip0) && programmed(d, "s1", vip1)
	})
	waitFor(t, 30*time.Second, "the Warning on s0", func() bool { return len(warnings()) == 1 })
	ownGauge := func() float64 { return testutil.ToFloat64(c.m.refused.WithLabelValues("own-address")) }
	waitFor(t, 30*time.Second, "edgelb_k8s_refused_services{source=own-address} 1", func() bool { return ownGauge() == 1 })
	if w := warnings()[0]; !strings.HasPrefix(w, "s0: on this gateway (other Services are served): not programmed: VIP "+vip0+" is this gateway's own address") {
		t.Errorf("warning %q", w)
	}
	if ingress("s0") != vip0 || ingress("s1") != vip1 {
		t.Errorf("assignments changed: s0 %s s1 %s", ingress("s0"), ingress("s1"))
	}
	// The pool in use stays valid; a new one holding an own address is not.
	if _, err := c.Manager().Pool(ctx, "p"); err != nil {
		t.Errorf("pool p: %v", err)
	}
	if _, err := c.Manager().CreatePool(ctx, lb.Pool{Name: "q", AutoAssign: true, Ranges: []lb.Range{mustRange(t, "198.51.100.0/29")}}); !errors.Is(err, lb.ErrOwnAddress) {
		t.Errorf("a pool holding an own address: %v, want ErrOwnAddress", err)
	}

	if err := c.SetOwnAddrs(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.SetOwnAddrs(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "s0 programmed again", func() bool { return programmed(latest(), "s0", vip0) })
	waitFor(t, 30*time.Second, "the refusal cleared", func() bool {
		var n int
		c.do(func(k *keeper) { n = len(k.refused) })
		return n == 0
	})
	if n := len(warnings()); n != 1 {
		t.Errorf("%d Warnings, want the one", n)
	}
	if g := ownGauge(); g != 0 {
		t.Errorf("edgelb_k8s_refused_services{source=own-address} %v after the address went, want 0", g)
	}
}

func mustRange(t *testing.T, s string) lb.Range {
	t.Helper()
	r, err := lb.ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
