package k8s

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// BenchmarkDesired1000 is one full desired-state computation for 1,000
// LoadBalancer Services with 3 endpoints each (what every batch of events costs).
func BenchmarkDesired1000(b *testing.B) {
	o, _ := Options{NodeName: "gw1"}.withDefaults()
	type item struct {
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
	}
	var items []item
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("s%04d", i)
		s := lbService(name, withIngress(fmt.Sprintf("192.0.2.%d", i%250)), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr(DefaultClass) })
		items = append(items, item{s, []*discoveryv1.EndpointSlice{slice(name, discoveryv1.AddressTypeIPv4, 8080,
			ep{addr: "10.0.0.1", node: "n1", ready: true}, ep{addr: "10.0.0.2", node: "n2", ready: true}, ep{addr: "10.0.0.3", node: "n3", ready: true})}})
	}
	pools := testPools()
	b.ReportAllocs()
	for b.Loop() {
		d := desiredInput{opts: &o, pools: pools}
		for _, it := range items {
			d.add(it.svc, it.slices)
		}
		_ = d.result()
	}
}
