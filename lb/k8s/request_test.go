package k8s

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lb"
)

func lbService(name string, mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func dual(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &policy; s.Spec.IPFamilies = fams }
}

func TestParseIntent(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	for _, tc := range []struct {
		name     string
		svc      *corev1.Service
		fams     []lb.Family
		all      bool
		req      map[lb.Family]string
		pool, sk string
		errField string
	}{
		{name: "default", svc: lbService("a"), fams: []lb.Family{lb.IPv4}, all: true},
		{name: "prefer dual", svc: lbService("a", dual(corev1.IPFamilyPolicyPreferDualStack, v6, v4)), fams: []lb.Family{lb.IPv6, lb.IPv4}},
		{name: "require dual", svc: lbService("a", dual(corev1.IPFamilyPolicyRequireDualStack, v4, v6)), fams: []lb.Family{lb.IPv4, lb.IPv6}, all: true},
		{name: "single v6", svc: lbService("a", dual(corev1.IPFamilyPolicySingleStack, v6)), fams: []lb.Family{lb.IPv6}, all: true},
		{name: "spec.loadBalancerIP", svc: lbService("a", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.7" }),
			fams: []lb.Family{lb.IPv4}, all: true, req: map[lb.Family]string{lb.IPv4: "192.0.2.7"}},
		{name: "edgelb annotations", svc: lbService("a", dual(corev1.IPFamilyPolicyRequireDualStack, v4, v6), func(s *corev1.Service) {
			s.Annotations[AnnotationIPs] = "192.0.2.7, 2001:db8::7"
			s.Annotations[AnnotationPool] = "blue"
			s.Annotations[AnnotationShared] = "k1"
		}), fams: []lb.Family{lb.IPv4, lb.IPv6}, all: true, req: map[lb.Family]string{lb.IPv4: "192.0.2.7", lb.IPv6: "2001:db8::7"}, pool: "blue", sk: "k1"},
		{name: "metallb annotations", svc: lbService("a", func(s *corev1.Service) {
			s.Annotations[MetalLBAnnotationIPs] = "192.0.2.9"
			s.Annotations[MetalLBAnnotationPool] = "green"
			s.Annotations[MetalLBAnnotationSh] = "k2"
		}), fams: []lb.Family{lb.IPv4}, all: true, req: map[lb.Family]string{lb.IPv4: "192.0.2.9"}, pool: "green", sk: "k2"},
		{name: "edgelb wins over metallb", svc: lbService("a", func(s *corev1.Service) {
			s.Annotations[MetalLBAnnotationPool] = "green"
			s.Annotations[AnnotationPool] = "blue"
		}), fams: []lb.Family{lb.IPv4}, all: true, pool: "blue"},
		{name: "malformed ip", svc: lbService("a", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "192.0.2.300" }),
			errField: "metadata.annotations[edgelb.io/loadBalancerIPs]"},
		{name: "malformed metallb ip", svc: lbService("a", func(s *corev1.Service) { s.Annotations[MetalLBAnnotationIPs] = "nope" }),
			errField: "metadata.annotations[metallb.io/loadBalancerIPs]"},
		{name: "two v4", svc: lbService("a", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "192.0.2.1,192.0.2.2" }),
			errField: "metadata.annotations[edgelb.io/loadBalancerIPs]"},
		{name: "v6 on v4 service", svc: lbService("a", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "2001:db8::1" }),
			errField: "metadata.annotations[edgelb.io/loadBalancerIPs]"},
		{name: "bad pool name", svc: lbService("a", func(s *corev1.Service) { s.Annotations[AnnotationPool] = "Bad_Pool" }),
			errField: "metadata.annotations[edgelb.io/address-pool]"},
		{name: "sctp", svc: lbService("a", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }),
			errField: "spec.ports[0].protocol"},
		{name: "spec ip differs from annotation", svc: lbService("a", func(s *corev1.Service) {
			s.Spec.LoadBalancerIP = "192.0.2.1"
			s.Annotations[AnnotationIPs] = "192.0.2.2"
		}), errField: "spec.loadBalancerIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := parseIntent(tc.svc, nil)
			if tc.errField != "" {
				var fe *lb.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.errField {
					t.Fatalf("err = %v, want FieldError on %s", err, tc.errField)
				}
				if !strings.Contains(err.Error(), `"`) {
					t.Errorf("error does not quote the value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Families) != len(tc.fams) {
				t.Fatalf("families %v, want %v", in.Families, tc.fams)
			}
			for i := range tc.fams {
				if in.Families[i] != tc.fams[i] {
					t.Fatalf("families %v, want %v", in.Families, tc.fams)
				}
			}
			if in.RequireAll != tc.all || in.Req.Pool != tc.pool || in.Req.SharingKey != tc.sk {
				t.Fatalf("got %+v", in)
			}
			if len(in.Requested) != len(tc.req) {
				t.Fatalf("requested %v, want %v", in.Requested, tc.req)
			}
			for f, s := range tc.req {
				if in.Requested[f] != netip.MustParseAddr(s) {
					t.Fatalf("requested %v, want %v", in.Requested, tc.req)
				}
			}
		})
	}
}

func TestOurs(t *testing.T) {
	cls, other := DefaultClass, "other.io/lb"
	o := Options{Class: DefaultClass}
	withClass := func(c *string) func(*corev1.Service) { return func(s *corev1.Service) { s.Spec.LoadBalancerClass = c } }
	if !o.ours(lbService("a", withClass(&cls))) || o.ours(lbService("a", withClass(&other))) || o.ours(lbService("a")) {
		t.Fatal("class not honoured")
	}
	o.HandleClassless = true
	if !o.ours(lbService("a")) {
		t.Fatal("classless not served with HandleClassless")
	}
	np := lbService("a", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	if o.ours(np) {
		t.Fatal("NodePort is not a LoadBalancer")
	}
}

func FuzzParseIntent(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "192.0.2.1,2001:db8::1", " , ", "::ffff:192.0.2.1", "fe80::1%eth0", "1.2.3.4,5.6.7.8"} {
		f.Add(s, "pool", "key")
	}
	f.Fuzz(func(t *testing.T, ips, pool, key string) {
		svc := lbService("f", dual(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol), func(s *corev1.Service) {
			s.Annotations[AnnotationIPs] = ips
			s.Annotations[AnnotationPool] = pool
			s.Annotations[AnnotationShared] = key
		})
		in, err := parseIntent(svc, nil)
		if err != nil {
			var fe *lb.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("not a FieldError: %v", err)
			}
			return
		}
		if len(in.Requested) > 2 || len(in.Families) == 0 {
			t.Fatalf("bad intent %+v", in)
		}
	})
}
