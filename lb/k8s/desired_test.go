package k8s

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

func ptr[T any](v T) *T { return &v }

type ep struct {
	addr, node         string
	ready, terminating bool
	zones              []string
}

func slice(svc string, fam discoveryv1.AddressType, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-x", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: fam,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.addr}, NodeName: ptr(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.ready), Serving: ptr(e.ready || e.terminating), Terminating: ptr(e.terminating)}}
		if e.zones != nil {
			x.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.zones {
				x.Hints.ForZones = append(x.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		s.Endpoints = append(s.Endpoints, x)
	}
	return s
}

func withIngress(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func testPools() []lb.Pool {
	r4, _ := lb.ParseRange("192.0.2.0/24")
	r6, _ := lb.ParseRange("2001:db8::/64")
	return []lb.Pool{{Name: "p", Ranges: []lb.Range{r4, r6}, Advertisement: lb.Advertisement{LocalPref: 150}}}
}

func TestDesiredEndpoints(t *testing.T) {
	o, _ := Options{NodeName: "gw1"}.withDefaults()
	d := desiredInput{opts: &o, pools: testPools(), nodeAddrs: []netip.Addr{netip.MustParseAddr("198.51.100.1")}}
	cls := DefaultClass
	web := lbService("web", withIngress("192.0.2.10", "2001:db8::10", "203.0.113.1"), func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &cls
		s.Spec.Ports[0].NodePort = 30080
	})
	d.add(web, []*discoveryv1.EndpointSlice{
		slice("web", discoveryv1.AddressTypeIPv4, 8080,
			ep{addr: "10.0.0.1", node: "n1", ready: true},
			ep{addr: "10.0.0.2", node: "n2", terminating: true}, // serving while terminating: draining
			ep{addr: "10.0.0.3", node: "n2"}),                   // not ready: out
		slice("web", discoveryv1.AddressTypeIPv6, 8080, ep{addr: "fd00::1", node: "n1", ready: true}),
	})
	// Local policy with no endpoint on gw1: not programmed, not announced.
	local := lbService("loc", withIngress("192.0.2.11"), func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &cls
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	d.add(local, []*discoveryv1.EndpointSlice{slice("loc", discoveryv1.AddressTypeIPv4, 80, ep{addr: "10.0.1.1", node: "n1", ready: true})})
	// Local policy with one endpoint here: only that one.
	local2 := lbService("loc2", withIngress("192.0.2.12"), func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = &cls
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	d.add(local2, []*discoveryv1.EndpointSlice{slice("loc2", discoveryv1.AddressTypeIPv4, 80,
		ep{addr: "10.0.2.1", node: "n1", ready: true}, ep{addr: "10.0.2.2", node: "gw1", ready: true})})
	// NodePort Service: on the gateway's addresses.
	np := lbService("np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.Ports[0].NodePort = 30001 })
	d.add(np, []*discoveryv1.EndpointSlice{slice("np", discoveryv1.AddressTypeIPv4, 80, ep{addr: "10.0.3.1", node: "n1", ready: true})})
	// Another class: ignored.
	other := lbService("other", withIngress("192.0.2.13"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("x.io/lb") })
	d.add(other, nil)

	got := d.result()
	byKey := map[string]proxy.Service{}
	for _, s := range got.Dataplane.Services {
		byKey[s.Key().String()] = s
		t.Logf("%-28s %-22s backends %v", s.Name, s.Key(), s.Backends)
	}
	w4 := byKey["192.0.2.10:80/TCP"]
	if len(w4.Backends) != 2 || w4.Backends[0] != (proxy.Backend{Addr: netip.MustParseAddrPort("10.0.0.1:8080"), Weight: 1}) ||
		!w4.Backends[1].Draining || w4.Backends[1].Weight != 0 {
		t.Fatalf("web v4 backends %+v", w4.Backends)
	}
	if w6 := byKey["[2001:db8::10]:80/TCP"]; len(w6.Backends) != 1 || w6.Backends[0].Addr.Addr() != netip.MustParseAddr("fd00::1") {
		t.Fatalf("web v6 backends %+v", w6.Backends)
	}
	if _, ok := byKey["203.0.113.1:80/TCP"]; ok {
		t.Fatal("an address outside every pool was programmed")
	}
	if _, ok := byKey["192.0.2.11:80/TCP"]; ok {
		t.Fatal("Local service without local endpoints programmed")
	}
	if l2 := byKey["192.0.2.12:80/TCP"]; len(l2.Backends) != 1 || l2.Backends[0].Addr.Addr() != netip.MustParseAddr("10.0.2.2") {
		t.Fatalf("Local backends %+v", l2.Backends)
	}
	// Local keeps the client's address (kube-proxy's eTP Local); Cluster
	// masquerades (the configured nat).
	if m := byKey["192.0.2.12:80/TCP"].Method; m != proxy.NATNoSNAT {
		t.Errorf("Local service method %q, want %q", m, proxy.NATNoSNAT)
	}
	if m := w4.Method; m != proxy.NAT {
		t.Errorf("Cluster service method %q, want %q", m, proxy.NAT)
	}
	if n := byKey["nodeport:30001/TCP"]; len(n.Backends) != 1 {
		t.Fatalf("nodeport %+v", n)
	}
	if _, ok := byKey["nodeport:30080/TCP"]; ok {
		t.Fatal("LoadBalancer node port exposed without NodePortsOnLoadBalancers")
	}
	if _, ok := byKey["192.0.2.13:80/TCP"]; ok {
		t.Fatal("other class programmed")
	}
	var vips []string
	for _, v := range got.VIPs {
		vips = append(vips, v.Addr.String())
		if v.Pool != "p" || v.LocalPref != 150 {
			t.Fatalf("vip %+v", v)
		}
		if v.Addr.String() == "192.0.2.12" && !v.Local {
			t.Fatal("Local VIP not marked Local")
		}
	}
	if len(vips) != 3 || vips[0] != "192.0.2.10" || vips[1] != "192.0.2.12" || vips[2] != "2001:db8::10" {
		t.Fatalf("announced %v", vips)
	}
}

func TestDesiredZoneHints(t *testing.T) {
	o, _ := Options{NodeName: "gw1"}.withDefaults()
	d := desiredInput{opts: &o, pools: testPools(), zone: "a"}
	s := lbService("z", withIngress("192.0.2.20"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr(DefaultClass) })
	d.add(s, []*discoveryv1.EndpointSlice{slice("z", discoveryv1.AddressTypeIPv4, 80,
		ep{addr: "10.1.0.1", ready: true, zones: []string{"a"}}, ep{addr: "10.1.0.2", ready: true, zones: []string{"b"}})})
	got := d.result().Dataplane.Services
	if len(got) != 1 || len(got[0].Backends) != 1 || got[0].Backends[0].Addr.Addr().String() != "10.1.0.1" {
		t.Fatalf("hints not preferred: %+v", got)
	}
	// One endpoint without hints: hints ignored (kube-proxy's rule).
	d = desiredInput{opts: &o, pools: testPools(), zone: "a"}
	d.add(s, []*discoveryv1.EndpointSlice{slice("z", discoveryv1.AddressTypeIPv4, 80,
		ep{addr: "10.1.0.1", ready: true, zones: []string{"a"}}, ep{addr: "10.1.0.3", ready: true})})
	if got := d.result().Dataplane.Services; len(got[0].Backends) != 2 {
		t.Fatalf("partial hints used: %+v", got)
	}
}

func TestDesiredNodePortMode(t *testing.T) {
	o, _ := Options{NodeName: "gw1", BackendMode: BackendNodePort}.withDefaults()
	node := func(name, ip string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	d := desiredInput{opts: &o, pools: testPools(), nodes: []*corev1.Node{node("n1", "198.51.100.11"), node("n2", "198.51.100.12")}}
	s := lbService("np", withIngress("192.0.2.30"), func(s *corev1.Service) {
		s.Spec.LoadBalancerClass = ptr(DefaultClass)
		s.Spec.Ports[0].NodePort = 31000
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	d.add(s, []*discoveryv1.EndpointSlice{slice("np", discoveryv1.AddressTypeIPv4, 80, ep{addr: "10.2.0.1", node: "n2", ready: true})})
	got := d.result()
	if len(got.Dataplane.Services) != 1 || len(got.Dataplane.Services[0].Backends) != 1 ||
		got.Dataplane.Services[0].Backends[0].Addr.String() != "198.51.100.12:31000" {
		t.Fatalf("nodeport mode: %+v", got.Dataplane.Services)
	}
	if got.VIPs[0].Local {
		t.Fatal("nodeport mode VIPs need no local endpoints")
	}
}

// add adds svc served on the addresses of its status.
func (d *desiredInput) add(svc *corev1.Service, slices []*discoveryv1.EndpointSlice) {
	d.addVIPs(svc, slices, ingressIPs(svc))
}
