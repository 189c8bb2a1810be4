package k8s

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// Annotations edgelb reads on Services. The metallb.io ones and the legacy
// metallb.universe.tf ones (still the most common in real clusters) are
// accepted so a cluster can move from MetalLB without editing every Service.
const (
	AnnotationIPs         = "edgelb.io/loadBalancerIPs"
	AnnotationPool        = "edgelb.io/address-pool"
	AnnotationShared      = "edgelb.io/allow-shared-ip"
	MetalLBAnnotationIPs  = "metallb.io/loadBalancerIPs"
	MetalLBAnnotationPool = "metallb.io/address-pool"
	MetalLBAnnotationSh   = "metallb.io/allow-shared-ip"

	LegacyMetalLBAnnotationIPs  = "metallb.universe.tf/loadBalancerIPs"
	LegacyMetalLBAnnotationPool = "metallb.universe.tf/address-pool"
	LegacyMetalLBAnnotationSh   = "metallb.universe.tf/allow-shared-ip"
)

// Keys read for each setting, first set wins: edgelb.io, then metallb.io,
// then metallb.universe.tf.
var (
	keysIPs    = []string{AnnotationIPs, MetalLBAnnotationIPs, LegacyMetalLBAnnotationIPs}
	keysPool   = []string{AnnotationPool, MetalLBAnnotationPool, LegacyMetalLBAnnotationPool}
	keysShared = []string{AnnotationShared, MetalLBAnnotationSh, LegacyMetalLBAnnotationSh}
)

// intent is what a Service asks of the allocator, parsed once from its
// spec and annotations.
type intent struct {
	// Requested holds explicitly requested VIPs by family (at most one each).
	Requested map[lb.Family]netip.Addr
	// Families wanted, in the Service's order (primary first).
	Families []lb.Family
	// RequireAll: every family must get an address (RequireDualStack or
	// explicit IPs); otherwise one is enough (PreferDualStack).
	RequireAll bool
	Req        lb.Request
}

// annotation returns the value of the first of keys set on svc and the key
// used, so errors name the annotation the user actually wrote.
func annotation(svc *corev1.Service, keys []string) (string, string) {
	for _, k := range keys {
		if v, ok := svc.Annotations[k]; ok {
			return strings.TrimSpace(v), k
		}
	}
	return "", ""
}

func familyOf(a netip.Addr) lb.Family {
	if a.Is4() {
		return lb.IPv4
	}
	return lb.IPv6
}

// parseIntent reads a LoadBalancer Service. Errors are *lb.FieldError naming
// the annotation or field and quoting the bad value; a requested address
// that is one of own (the gateway's, Options.OwnAddrs) is refused.
func parseIntent(svc *corev1.Service, own *lb.OwnAddrs) (intent, error) {
	in := intent{Requested: map[lb.Family]netip.Addr{}}
	for i, p := range svc.Spec.Ports {
		proto, err := proxy.ParseProtocol(string(p.Protocol))
		if err != nil {
			return in, &lb.FieldError{Field: fmt.Sprintf("spec.ports[%d].protocol", i), Value: string(p.Protocol), Err: err}
		}
		in.Req.Ports = append(in.Req.Ports, lb.PortProto{Port: uint16(p.Port), Protocol: proto})
	}
	pool, key := annotation(svc, keysPool)
	if pool != "" {
		if err := lb.ValidateName(pool); err != nil {
			return in, &lb.FieldError{Field: "metadata.annotations[" + key + "]", Value: pool, Err: err}
		}
		in.Req.Pool = pool
	}
	in.Req.SharingKey, _ = annotation(svc, keysShared)
	// Who asks, for pools' serviceAllocation (the namespace's labels are
	// the caller's to add: they live on another object).
	in.Req.Namespace, in.Req.Labels = svc.Namespace, svc.Labels

	// Families the Service has (the apiserver fills ipFamilies; a fake
	// clientset does not: IPv4 then).
	var svcFams []lb.Family
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			svcFams = append(svcFams, lb.IPv4)
		case corev1.IPv6Protocol:
			svcFams = append(svcFams, lb.IPv6)
		}
	}
	if len(svcFams) == 0 {
		svcFams = []lb.Family{lb.IPv4}
	}
	policy := corev1.IPFamilyPolicySingleStack
	if svc.Spec.IPFamilyPolicy != nil {
		policy = *svc.Spec.IPFamilyPolicy
	}

	ips, key := annotation(svc, keysIPs)
	field := "metadata.annotations[" + key + "]"
	if ips == "" && svc.Spec.LoadBalancerIP != "" {
		ips, field = strings.TrimSpace(svc.Spec.LoadBalancerIP), "spec.loadBalancerIP"
	}
	if ips != "" {
		for _, s := range strings.Split(ips, ",") {
			s = strings.TrimSpace(s)
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return in, &lb.FieldError{Field: field, Value: s, Err: fmt.Errorf("not an IP address")}
			}
			a = a.Unmap()
			// The same address-class table as REST and the config file.
			if err := lb.CheckAddr(a, lb.UseVIP); err != nil {
				return in, &lb.FieldError{Field: field, Value: s, Err: err}
			}
			if err := own.Check(a, lb.UseVIP); err != nil {
				return in, &lb.FieldError{Field: field, Value: s, Err: err}
			}
			f := familyOf(a)
			if _, dup := in.Requested[f]; dup {
				return in, &lb.FieldError{Field: field, Value: ips, Err: fmt.Errorf("more than one %s address", f)}
			}
			if !hasFamily(svcFams, f) {
				return in, &lb.FieldError{Field: field, Value: s,
					Err: fmt.Errorf("the Service's ipFamilies %v do not include %s", svc.Spec.IPFamilies, f)}
			}
			in.Requested[f] = a
			in.Families = append(in.Families, f)
		}
		if svc.Spec.LoadBalancerIP != "" && field != "spec.loadBalancerIP" {
			a, err := netip.ParseAddr(strings.TrimSpace(svc.Spec.LoadBalancerIP))
			if err != nil || in.Requested[familyOf(a)] != a.Unmap() {
				return in, &lb.FieldError{Field: "spec.loadBalancerIP", Value: svc.Spec.LoadBalancerIP,
					Err: fmt.Errorf("differs from %s %q", key, ips)}
			}
		}
		// Requested addresses are a contract: all or nothing.
		in.RequireAll = true
		return in, nil
	}
	switch policy {
	case corev1.IPFamilyPolicySingleStack:
		in.Families = svcFams[:1]
		in.RequireAll = true
	case corev1.IPFamilyPolicyRequireDualStack:
		in.Families = svcFams
		in.RequireAll = true
	default: // PreferDualStack: as many as the pools allow, at least one
		in.Families = svcFams
	}
	return in, nil
}

func hasFamily(fs []lb.Family, f lb.Family) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// ingressIPs returns the parsed status.loadBalancer.ingress IPs (hostnames and
// junk are skipped: we never write them).
func ingressIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// ours reports whether this controller serves the Service's VIPs.
// methodFor is the forwarding method of svc: the configured one, except
// that externalTrafficPolicy Local keeps the client's address (as
// kube-proxy does) when backends are endpoints: only endpoints on this
// node are used, so their replies come back through it to be un-NATed.
func (o *Options) methodFor(svc *corev1.Service) proxy.Method {
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		o.BackendMode == BackendEndpoints && o.Method == proxy.NAT {
		return proxy.NATNoSNAT
	}
	return o.Method
}

func (o *Options) ours(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return o.HandleClassless
	}
	return *svc.Spec.LoadBalancerClass == o.Class
}
