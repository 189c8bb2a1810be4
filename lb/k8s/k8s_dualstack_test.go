//go:build k8s

package k8s

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/edgelb/edgelb/lab/conformance"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// TestK8sDualStackNodePort (issue 14): a dual-stack NodePort Service in
// cluster mode serves both families. Before the one renderer it became ONE
// node-port service mixing IPv4 and IPv6 endpoints, which nftables refuses,
// so neither family answered. Here the IPv4 endpoints are be1 and be2 and
// the IPv6 ones be2 and be3: requests over IPv4 to the gateway's node port
// must reach only be1/be2, over IPv6 only be2/be3, and every Apply of the
// desired state must succeed whole.
func TestK8sDualStackNodePort(t *testing.T) {
	netns.RequireRoot(t)
	e := newEnv(t)
	topo := conformance.NewTopology(t, netns.Unique("elbk8sds"))
	dp, err := nft.New(nft.Options{NetNS: int(topo.Gateway.Handle())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dp.Cleanup(context.Background())
		_ = dp.Close()
	})
	opts := testOptions("gw1")
	opts.NodeAddrs = []netip.Addr{conformance.GatewayAddr4, conformance.GatewayAddr6}
	r := e.start(t, opts)
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)

	// The daemon's loop, reduced: apply every desired state; any refusal
	// (the bug refused the mixed node-port service) is remembered.
	var mu sync.Mutex
	var applyErr error
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
					mu.Lock()
					applyErr = errors.Join(applyErr, err)
					mu.Unlock()
				}
			}
		}
	}()

	const ns, nodePort = "apps", 30080
	e.svc(t, ns, "dual", families(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
		func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.LoadBalancerClass = nil
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort,
				TargetPort: intstr.FromInt32(conformance.HTTPPort), Protocol: corev1.ProtocolTCP}}
		})
	slice := func(name string, fam discoveryv1.AddressType, addrs ...netip.Addr) {
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "dual"}},
			AddressType: fam,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(conformance.HTTPPort)), Protocol: ptr(corev1.ProtocolTCP)}},
		}
		for _, a := range addrs {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()}, NodeName: ptr("n1"),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}})
		}
		if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b := topo.Backends
	slice("dual-v4", discoveryv1.AddressTypeIPv4, b[0].Addr4, b[1].Addr4)
	slice("dual-v6", discoveryv1.AddressTypeIPv6, b[1].Addr6, b[2].Addr6)

	// The desired state: one node-port service per family, each with its
	// own family's endpoints.
	var np4, np6 proxy.Service
	waitUntil(t, 30*time.Second, "both families' node-port services desired", func() bool {
		np4, np6 = proxy.Service{}, proxy.Service{}
		for _, s := range r.c.Desired().Dataplane.Services {
			if s.NodePort != nodePort || s.VIP.IsValid() {
				continue
			}
			switch s.AddrFamily() {
			case proxy.IPv4:
				np4 = s
			case proxy.IPv6:
				np6 = s
			}
		}
		return len(np4.Backends) == 2 && len(np6.Backends) == 2
	})
	t.Logf("desired: %s %q backends %v; %s %q backends %v", np4.Key(), np4.Name, np4.Backends, np6.Key(), np6.Name, np6.Backends)

	type famCase struct {
		front netip.AddrPort
		want  map[string]bool
	}
	cases := []famCase{
		{netip.AddrPortFrom(conformance.GatewayAddr4, nodePort), map[string]bool{"be1": true, "be2": true}},
		{netip.AddrPortFrom(conformance.GatewayAddr6, nodePort), map[string]bool{"be2": true, "be3": true}},
	}
	get := func(front netip.AddrPort) (string, error) {
		rep, err := topo.GetHTTP(e.ctx, netip.Addr{}, front, 2*time.Second)
		return rep.Backend, err
	}
	for _, c := range cases {
		waitUntil(t, 30*time.Second, "node port answering on "+c.front.String(), func() bool {
			name, err := get(c.front)
			return err == nil && c.want[name]
		})
	}
	// Every request must be answered by one of its family's endpoints: no
	// chance involved (which of the two answers is not asserted).
	const n = 20
	for _, c := range cases {
		hits, fails := map[string]int{}, 0
		for i := 0; i < n; i++ {
			name, err := get(c.front)
			if err != nil {
				fails++
				continue
			}
			hits[name]++
		}
		t.Logf("MEASURED dual-stack NodePort Service, %d requests to %s: %s%d failed", n, c.front, fmtHits(hits), fails)
		for name := range hits {
			if !c.want[name] {
				t.Errorf("%s reached %s, an endpoint of the other family only", c.front, name)
			}
		}
		if fails != 0 {
			t.Errorf("%s: %d of %d requests failed", c.front, fails, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if applyErr != nil {
		t.Errorf("the dataplane refused part of the desired state: %v", applyErr)
	}
}
