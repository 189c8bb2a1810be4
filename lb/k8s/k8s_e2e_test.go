//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy/nft"
)

// TestK8sEndToEnd: a Service and an EndpointSlice pointing at backends in
// their own network namespaces; the controller's desired state programs the
// nftables dataplane inside the gateway namespace; HTTP from the client
// namespace through the VIP reaches the ready endpoints only, follows
// endpoint changes, and stops when the Service is deleted.
func TestK8sEndToEnd(t *testing.T) {
	netns.RequireRoot(t)
	e := newEnv(t)
	lab, err := demo.New(demo.Options{Prefix: netns.Unique("elbk8s"), Backends: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	e.pool(t, "e2e", true, demo.PoolRange)

	dp, err := nft.New(nft.Options{NetNS: int(lab.Gateway.Handle())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dp.Cleanup(context.Background())
		_ = dp.Close()
	})
	opts := testOptions("gw1")
	opts.NodeAddrs = []netip.Addr{demo.GatewayFront.Addr()} // node ports listen here
	r := e.start(t, opts)
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)
	// The daemon's loop, reduced: apply every desired state as it comes.
	ctx, cancel := context.WithCancel(context.Background())
	applied := make(chan struct{})
	defer func() { cancel(); <-applied }()
	sub := r.c.Subscribe()
	go func() {
		defer close(applied)
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-sub:
				if err := dp.Apply(ctx, d.Dataplane); err != nil && ctx.Err() == nil {
					t.Errorf("apply: %v", err)
				}
			}
		}
	}()

	const ns = "apps"
	e.svc(t, ns, "web", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(int32(demo.BackendPort)), Protocol: corev1.ProtocolTCP}}
	})
	vip := netip.MustParseAddr(e.waitAny(t, ns, "web", 1, 30*time.Second)[0])
	t.Logf("web got VIP %s", vip)
	// The client reaches the VIP through the gateway (announcements are
	// another package's job; a route in the client namespace stands in).
	if err := lab.Client.AddRoute(netip.PrefixFrom(vip, 32), demo.GatewayFront.Addr()); err != nil {
		t.Fatal(err)
	}

	ep := func(addr string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr("n1"),
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: ptr(false)}}
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(demo.BackendPort)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{
			ep(lab.Backends[0].Addr.Addr().String(), true),
			ep(lab.Backends[1].Addr.Addr().String(), true),
			ep(lab.Backends[2].Addr.Addr().String(), false), // not ready: no traffic
		},
	}
	if sl, err = e.cs.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	client := lab.Client.HTTPClient(2 * time.Second)
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
	hits := func(n int) (map[string]int, int) {
		got, fails := map[string]int{}, 0
		for i := 0; i < n; i++ {
			name, err := lab.Get(e.ctx, client, url)
			if err != nil {
				fails++
				continue
			}
			got[name]++
		}
		return got, fails
	}
	waitUntil(t, 30*time.Second, "traffic through the VIP", func() bool { _, f := hits(1); return f == 0 })
	got, fails := hits(30)
	t.Logf("MEASURED 30 requests to %s: %v, %d failed (backend-3 not ready)", url, fmtHits(got), fails)
	if fails != 0 || got["backend-1"] == 0 || got["backend-2"] == 0 || got["backend-3"] != 0 {
		t.Fatalf("distribution %v, %d failures", got, fails)
	}

	// backend-3 becomes ready: it gets traffic too.
	sl.Endpoints[2] = ep(lab.Backends[2].Addr.Addr().String(), true)
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Update(e.ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitUntil(t, 30*time.Second, "backend-3 in rotation", func() bool { g, _ := hits(6); return g["backend-3"] > 0 })
	// 60 requests: one of three backends missed by chance 3·(2/3)^60 ≈ 1e-10
	// of the time (with 30, 1.6e-5).
	got, fails = hits(60)
	t.Logf("MEASURED after backend-3 became ready (in rotation within %s): %v, %d failed", took.Round(time.Millisecond), fmtHits(got), fails)
	if fails != 0 || len(got) != 3 {
		t.Fatalf("distribution %v, %d failures", got, fails)
	}

	// externalTrafficPolicy Local: only this gateway's (node gw1) endpoints,
	// and the VIP is announced only while there are some.
	loc := e.svc(t, ns, "local", func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(int32(demo.BackendPort)), Protocol: corev1.ProtocolTCP}}
	})
	lvip := netip.MustParseAddr(e.waitAny(t, ns, loc.Name, 1, 30*time.Second)[0])
	if err := lab.Client.AddRoute(netip.PrefixFrom(lvip, 32), demo.GatewayFront.Addr()); err != nil {
		t.Fatal(err)
	}
	lsl := sl.DeepCopy()
	lsl.ObjectMeta = metav1.ObjectMeta{Name: "local-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: loc.Name}}
	lsl.Endpoints = []discoveryv1.Endpoint{ep(lab.Backends[0].Addr.Addr().String(), true), ep(lab.Backends[1].Addr.Addr().String(), true)}
	lsl.Endpoints[1].NodeName = ptr("gw1") // backend-2 runs on this gateway's node
	if lsl, err = e.cs.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, lsl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	announced := func() (bool, bool) {
		for _, v := range r.c.Desired().VIPs {
			if v.Addr == lvip {
				return true, v.Local
			}
		}
		return false, false
	}
	waitUntil(t, 30*time.Second, "Local VIP announced", func() bool { a, l := announced(); return a && l })
	lurl := fmt.Sprintf("http://%s/", netip.AddrPortFrom(lvip, 80))
	// Announced is the controller's decision; the applier goroutine above
	// programs the kernel a moment later (CI under load sent the first
	// request in between: its SYN went unNATed and timed out). Wait for
	// the dataplane as for web, each try on a new connection.
	waitUntil(t, 30*time.Second, "traffic through the Local VIP", func() bool {
		_, err := lab.Get(e.ctx, client, lurl)
		return err == nil
	})
	lHits := map[string]int{}
	client4 := demo.ClientAddr.Addr().String()
	seen0 := lab.Backends[1].Peers()[client4]
	for i := 0; i < 10; i++ {
		name, err := lab.Get(e.ctx, client, lurl)
		if err != nil {
			t.Fatal(err)
		}
		lHits[name]++
	}
	lsl.Endpoints[1].NodeName = ptr("n2") // no endpoint left on gw1
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Update(e.ctx, lsl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := waitUntil(t, 30*time.Second, "Local VIP withdrawn", func() bool { a, _ := announced(); return !a })
	t.Logf("MEASURED externalTrafficPolicy Local: %v (only the endpoint on gw1), announced with Local=true; withdrawn %s after the last local endpoint left",
		fmtHits(lHits), gone.Round(time.Millisecond))
	if lHits["backend-2"] != 10 {
		t.Fatalf("Local hits %v", lHits)
	}
	// eTP Local keeps the client's address, as kube-proxy does.
	if n := lab.Backends[1].Peers()[client4] - seen0; n != 10 {
		t.Errorf("backend-2 saw the client's own address %d times of 10 (Local must not masquerade); sources %v", n, lab.Backends[1].Peers())
	} else {
		t.Logf("MEASURED externalTrafficPolicy Local keeps the client address: backend-2 saw %s 10 times of 10", client4)
	}

	// A NodePort Service: served on the gateway's own address.
	np := e.svc(t, ns, "np", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.LoadBalancerClass = nil
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(demo.NodePort),
			TargetPort: intstr.FromInt32(int32(demo.BackendPort)), Protocol: corev1.ProtocolTCP}}
	})
	npSlice := sl.DeepCopy()
	npSlice.ObjectMeta = metav1.ObjectMeta{Name: "np-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: np.Name}}
	npSlice.Endpoints = npSlice.Endpoints[:1] // backend-1 only
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, npSlice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	npURL := fmt.Sprintf("http://%s/", netip.AddrPortFrom(demo.GatewayFront.Addr(), demo.NodePort))
	waitUntil(t, 30*time.Second, "node port answering", func() bool {
		name, err := lab.Get(e.ctx, client, npURL)
		return err == nil && name == "backend-1"
	})
	npHits := map[string]int{}
	for i := 0; i < 10; i++ {
		name, err := lab.Get(e.ctx, client, npURL)
		if err != nil {
			t.Fatal(err)
		}
		npHits[name]++
	}
	t.Logf("MEASURED NodePort Service on the gateway's address %s: %v", npURL, fmtHits(npHits))
	if npHits["backend-1"] != 10 {
		t.Fatalf("node port hits %v", npHits)
	}

	// Service deleted: the VIP stops answering.
	e.deleteSvc(t, ns, "web")
	took = waitUntil(t, 30*time.Second, "VIP out of the desired state", func() bool { return len(r.c.Desired().VIPs) == 0 })
	// The applier removes it a moment later (a fixed 100 ms sleep here was
	// a bet on the machine's load): wait until a request fails, then no
	// request may get through.
	waitUntil(t, 30*time.Second, "VIP no longer answering", func() bool { _, f := hits(1); return f == 1 })
	if _, f := hits(3); f != 3 {
		t.Fatalf("VIP still answers after the Service was deleted")
	}
	t.Logf("MEASURED Service deleted → VIP out of the desired state in %s; 3/3 requests then failed", took.Round(time.Millisecond))
}

func fmtHits(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s=%d ", k, m[k])
	}
	return s
}
