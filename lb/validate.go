package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// Limits on a service's values.
const (
	MaxAffinityTimeout = 24 * time.Hour
	MaxWeight          = 65535
	// MaxAggregationLen bounds a pool's BGP aggregation length (IPv6; an
	// IPv4 pool is bounded by 32, see ValidateAggregation).
	MaxAggregationLen = 128
	// Min/MaxExpectStatus bound an HTTP health check's expected status.
	MinExpectStatus = 100
	MaxExpectStatus = 599
)

// PortRange is an inclusive range of ports (the node-port range).
type PortRange struct {
	First, Last uint16
}

// Contains reports whether p is inside the range.
func (r PortRange) Contains(p uint16) bool { return r.First <= p && p <= r.Last }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// DefaultNodePortRange is Kubernetes' default.
var DefaultNodePortRange = PortRange{First: 30000, Last: 32767}

// ValidateOptions is the context a service is validated in.
type ValidateOptions struct {
	// NodePortRange bounds node ports; zero means DefaultNodePortRange.
	NodePortRange PortRange
	// Pools, when non-nil, are checked against: the pool named exists, a
	// requested VIP lies in it (or in some pool) and is not an avoided .0/.255.
	Pools []Pool
	// Others are the other services (one of the same name is skipped):
	// a node port/protocol belongs to one service only.
	Others []ServiceSpec
	// NodePorts is the same knowledge as an index (node port and protocol
	// → the service using it), for callers validating many services at
	// once; an entry naming the service itself is ignored.
	NodePorts map[PortProto]string
	// VIPs, when non-nil, maps every VIP in use to the service holding it
	// (filled by the writer, the one place that knows them all): a backend
	// may not be a VIP, another service's or its own (the packet would loop
	// through us).
	VIPs map[netip.Addr]string
}

// NormalizeService fills the defaults a spec may leave out: scheduler wrr,
// method nat, IPv4 when neither VIPs nor families are given. It changes
// nothing that is set.
func NormalizeService(s *ServiceSpec) {
	if s.Scheduler == "" {
		s.Scheduler = proxy.DefaultScheduler
	}
	if s.Method == "" {
		s.Method = proxy.NAT
	}
	if len(s.VIPs) == 0 && len(s.Families) == 0 {
		s.Families = []Family{IPv4}
	}
	for i := range s.VIPs {
		s.VIPs[i] = s.VIPs[i].Unmap()
	}
	for i := range s.Backends {
		s.Backends[i].Addr = s.Backends[i].Addr.Unmap()
	}
	if s.Health != nil {
		NormalizeHealth(s.Health)
	}
}

// Health-check defaults, the same for REST and the config file.
const (
	DefaultCheckInterval = 5 * time.Second
	DefaultCheckTimeout  = 2 * time.Second // or the interval, if shorter
	DefaultRise          = 2
	DefaultFall          = 3
	DefaultExpectStatus  = 200
)

// NormalizeHealth fills what a health check may leave out (type tcp,
// interval 5s, timeout 2s or the interval if shorter, rise 2, fall 3; for
// http(s) path / and expectStatus 200). It changes nothing that is set.
func NormalizeHealth(h *HealthCheck) {
	if h.Type == "" {
		h.Type = "tcp"
	}
	if h.Interval == 0 {
		h.Interval = DefaultCheckInterval
	}
	if h.Timeout == 0 {
		h.Timeout = min(DefaultCheckTimeout, h.Interval)
	}
	if h.Rise == 0 {
		h.Rise = DefaultRise
	}
	if h.Fall == 0 {
		h.Fall = DefaultFall
	}
	if h.Type == "http" || h.Type == "https" {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Expect == 0 {
			h.Expect = DefaultExpectStatus
		}
	}
}

// ValidateService checks a (normalized) standalone service on its own and
// against o. The first problem found is returned as a *FieldError naming
// the field (JSON path, e.g. "ports[1].nodePort") and quoting the value.
func ValidateService(s *ServiceSpec, o ValidateOptions) error {
	fe := func(field, value, format string, args ...any) error {
		return &FieldError{Field: field, Value: value, Err: fmt.Errorf(format, args...)}
	}
	if err := ValidateName(s.Name); err != nil {
		return &FieldError{Field: "name", Value: s.Name, Err: err}
	}
	if err := validateAddrs(s, o); err != nil {
		return err
	}
	fams := map[Family]bool{}
	for _, v := range s.VIPs {
		fams[FamilyOf(v)] = true
	}
	for _, f := range s.Families {
		fams[f] = true
	}

	nr := o.NodePortRange
	if nr == (PortRange{}) {
		nr = DefaultNodePortRange
	}
	if len(s.Ports) == 0 {
		return fe("ports", "", "a service needs at least one port")
	}
	seen := map[PortProto]int{}
	names := map[string]int{}
	for k, p := range s.Ports {
		f := fmt.Sprintf("ports[%d]", k)
		if p.Protocol != proxy.TCP && p.Protocol != proxy.UDP {
			return fe(f+".protocol", p.Protocol.String(), "want TCP or UDP")
		}
		if p.Port == 0 {
			return fe(f+".port", "0", "out of range 1-65535")
		}
		if j, dup := seen[PortProto{p.Port, p.Protocol}]; dup {
			return fe(f+".port", fmt.Sprintf("%d/%s", p.Port, p.Protocol), "listed twice (also ports[%d])", j)
		}
		seen[PortProto{p.Port, p.Protocol}] = k
		if p.Name != "" {
			if err := ValidateName(p.Name); err != nil || len(p.Name) > 63 {
				return fe(f+".name", p.Name, "want lower-case letters, digits and '-', at most 63 characters")
			}
			if j, dup := names[p.Name]; dup {
				return fe(f+".name", p.Name, "duplicate port name (also ports[%d])", j)
			}
			names[p.Name] = k
		}
		if p.NodePort != 0 {
			if !nr.Contains(p.NodePort) {
				return fe(f+".nodePort", fmt.Sprint(p.NodePort), "outside the node-port range %s", nr)
			}
			if owner, ok := o.NodePorts[PortProto{p.NodePort, p.Protocol}]; ok && owner != s.Name {
				return fe(f+".nodePort", fmt.Sprintf("%d/%s", p.NodePort, p.Protocol), "already used by service %q", owner)
			}
			for _, other := range o.Others {
				if other.Name == s.Name {
					continue
				}
				for _, q := range other.Ports {
					if q.NodePort == p.NodePort && q.Protocol == p.Protocol {
						return fe(f+".nodePort", fmt.Sprintf("%d/%s", p.NodePort, p.Protocol), "already used by service %q", other.Name)
					}
				}
			}
		}
	}

	type bkey struct {
		a netip.Addr
		p uint16
	}
	bseen := map[bkey]int{}
	for b, be := range s.Backends {
		f := fmt.Sprintf("backends[%d]", b)
		a := be.Addr
		if err := CheckAddr(a, UseBackend); err != nil {
			return &FieldError{Field: f + ".address", Value: a.String(), Err: err}
		}
		if slices.Contains(s.VIPs, a) {
			return fe(f+".address", a.String(), "the VIP of service %q: a backend may not be a VIP (the packet would come back here)", s.Name)
		}
		if owner, ok := o.VIPs[a]; ok {
			return fe(f+".address", a.String(), "the VIP of service %q: a backend may not be a VIP (the packet would come back here)", owner)
		}
		if !fams[FamilyOf(a)] {
			return fe(f+".address", a.String(), "an %s backend, but the service has no %s VIP", FamilyOf(a), FamilyOf(a))
		}
		if be.Weight > MaxWeight {
			return fe(f+".weight", fmt.Sprint(be.Weight), "out of range 0-%d", MaxWeight)
		}
		if j, dup := bseen[bkey{a, be.Port}]; dup {
			return fe(f+".address", backendString(be), "listed twice (also backends[%d])", j)
		}
		bseen[bkey{a, be.Port}] = b
	}

	if _, err := proxy.ParseScheduler(string(s.Scheduler)); err != nil || s.Scheduler == "" {
		return fe("scheduler", string(s.Scheduler), "want one of rr, wrr, lc, wlc, sh, dh, sed, nq, mh")
	}
	if err := validateMethod(s); err != nil {
		return err
	}
	if s.Affinity < 0 || s.Affinity > MaxAffinityTimeout || s.Affinity > 0 && s.Affinity < time.Second {
		return fe("affinityTimeout", s.Affinity.String(), "out of range 1s-%s (0 = no affinity)", MaxAffinityTimeout)
	}
	if s.Health != nil {
		return validateHealth(s.Health)
	}
	return nil
}

func backendString(b BackendSpec) string {
	if b.Port == 0 {
		return b.Addr.String()
	}
	return netip.AddrPortFrom(b.Addr, b.Port).String()
}

// validateAddrs checks VIPs, families and the pool.
func validateAddrs(s *ServiceSpec, o ValidateOptions) error {
	if s.Pool != "" {
		if err := ValidateName(s.Pool); err != nil {
			return &FieldError{Field: "pool", Value: s.Pool, Err: err}
		}
	}
	var pool *Pool
	if o.Pools != nil && s.Pool != "" {
		for i := range o.Pools {
			if o.Pools[i].Name == s.Pool {
				pool = &o.Pools[i]
			}
		}
		if pool == nil {
			return &FieldError{Field: "pool", Value: s.Pool, Err: errors.New("no pool of that name")}
		}
	}
	if len(s.VIPs) > 0 && len(s.Families) > 0 {
		return &FieldError{Field: "families", Err: errors.New("set vips or families, not both (families choose what to allocate when there is no VIP)")}
	}
	seen := map[Family]bool{}
	for k, v := range s.VIPs {
		f := fmt.Sprintf("vips[%d]", k)
		if err := CheckAddr(v, UseVIP); err != nil {
			return &FieldError{Field: f, Value: v.String(), Err: err}
		}
		if seen[FamilyOf(v)] {
			return &FieldError{Field: f, Value: v.String(), Err: fmt.Errorf("two %s VIPs: a service has at most one VIP per family", FamilyOf(v))}
		}
		seen[FamilyOf(v)] = true
		if o.Pools == nil {
			continue
		}
		in := pool
		if in == nil {
			for i := range o.Pools {
				if o.Pools[i].Contains(v) {
					in = &o.Pools[i]
				}
			}
		}
		switch {
		case in == nil:
			return &FieldError{Field: f, Value: v.String(), Err: errors.New("outside every pool")}
		case !in.Contains(v):
			return &FieldError{Field: f, Value: v.String(), Err: fmt.Errorf("outside pool %q (%s)", in.Name, strings.Join(in.RangeStrings(), ", "))}
		case !in.Usable(v):
			return &FieldError{Field: f, Value: v.String(), Err: fmt.Errorf("pool %q avoids addresses ending in .0 and .255", in.Name)}
		}
	}
	for k, fam := range s.Families {
		f := fmt.Sprintf("families[%d]", k)
		if fam != IPv4 && fam != IPv6 {
			return &FieldError{Field: f, Value: fmt.Sprint(uint8(fam)), Err: errors.New("want IPv4 or IPv6")}
		}
		if seen[fam] {
			return &FieldError{Field: f, Value: fam.String(), Err: errors.New("listed twice")}
		}
		seen[fam] = true
	}
	return nil
}

// validateMethod: DR and tunnel deliver the packet with the VIP's port
// unchanged, so they cannot map ports or serve node ports.
func validateMethod(s *ServiceSpec) error {
	switch s.Method {
	case proxy.NAT, proxy.NATNoSNAT:
		return nil
	case proxy.DirectRouting, proxy.Tunnel:
	default:
		return &FieldError{Field: "method", Value: string(s.Method), Err: errors.New("want nat, nat-nosnat, dr or tunnel")}
	}
	for k, p := range s.Ports {
		if p.TargetPort != 0 && p.TargetPort != p.Port {
			return &FieldError{Field: fmt.Sprintf("ports[%d].targetPort", k), Value: fmt.Sprint(p.TargetPort),
				Err: fmt.Errorf("method %s cannot map ports: targetPort must equal port %d", s.Method, p.Port)}
		}
		if p.NodePort != 0 {
			return &FieldError{Field: fmt.Sprintf("ports[%d].nodePort", k), Value: fmt.Sprint(p.NodePort),
				Err: fmt.Errorf("method %s cannot serve node ports", s.Method)}
		}
	}
	for b, be := range s.Backends {
		for _, p := range s.Ports {
			if be.Port != 0 && be.Port != p.Port {
				return &FieldError{Field: fmt.Sprintf("backends[%d].port", b), Value: fmt.Sprint(be.Port),
					Err: fmt.Errorf("method %s cannot map ports: the backend port must equal the service port %d (leave it out)", s.Method, p.Port)}
			}
		}
	}
	return nil
}

func validateHealth(h *HealthCheck) error {
	fe := func(field, value, format string, args ...any) error {
		return &FieldError{Field: "healthCheck." + field, Value: value, Err: fmt.Errorf(format, args...)}
	}
	switch h.Type {
	case "tcp":
		if h.Path != "" || h.Host != "" || h.Expect != 0 {
			return fe("type", h.Type, "path, host and expectStatus only apply to http and https checks")
		}
	case "http", "https":
		if strings.Contains(h.Path, "://") {
			// A URL pasted into path (maybe one without a host): say so.
			return fe("path", h.Path, "a URL, not a path: put the path here (e.g. /healthz) and the Host header in host; the check connects to each backend")
		}
		if h.Path != "" && !strings.HasPrefix(h.Path, "/") {
			return fe("path", h.Path, "must start with /")
		}
		if h.Expect != 0 && (h.Expect < MinExpectStatus || h.Expect > MaxExpectStatus) {
			return fe("expectStatus", fmt.Sprint(h.Expect), "out of range %d-%d", MinExpectStatus, MaxExpectStatus)
		}
		if err := ValidateHealthHost(h.Host); err != nil {
			return &FieldError{Field: "healthCheck.host", Value: h.Host, Err: err}
		}
	default:
		return fe("type", h.Type, "want tcp, http or https")
	}
	switch {
	case h.Interval <= 0:
		return fe("interval", h.Interval.String(), "must be more than 0")
	case h.Timeout <= 0:
		return fe("timeout", h.Timeout.String(), "must be more than 0")
	case h.Timeout > h.Interval:
		return fe("timeout", h.Timeout.String(), "longer than interval %s", h.Interval)
	case h.Rise < 1:
		return fe("rise", fmt.Sprint(h.Rise), "must be at least 1")
	case h.Fall < 1:
		return fe("fall", fmt.Sprint(h.Fall), "must be at least 1")
	}
	return nil
}

// ErrBadHost is wrapped by ValidateHealthHost's refusals.
var ErrBadHost = errors.New("want a host name (the Host header), like www.example.com or www.example.com:8080")

// ValidateHealthHost checks a health check's Host header ("" = none): a
// host or host:port, nothing a URL would read as path, user or query.
func ValidateHealthHost(h string) error {
	if h == "" {
		return nil
	}
	if strings.ContainsAny(h, "/ \t\r\n@?#\\") {
		return ErrBadHost
	}
	if u, err := url.Parse("http://" + h + "/"); err != nil || u.Host != h || u.Hostname() == "" {
		return ErrBadHost
	}
	return nil
}

// MaxPriority bounds serviceAllocation.priority (the CRD's int32).
const MaxPriority = 1<<31 - 1

// ValidateAllocation checks a pool's serviceAllocation: priority 0 or
// more, namespaces as Kubernetes names them, selectors with valid label
// keys and values and known operators (the API server does not check what
// a custom resource carries, so this is the only check).
func ValidateAllocation(a *ServiceAllocation) error {
	if a == nil {
		return nil
	}
	fe := func(field, value, format string, args ...any) error {
		return &FieldError{Field: "serviceAllocation." + field, Value: value, Err: fmt.Errorf(format, args...)}
	}
	if a.Priority < 0 || a.Priority > MaxPriority {
		return fe("priority", fmt.Sprint(a.Priority), "out of range 0-%d (lower is tried first; 0 = unset, after every set priority)", MaxPriority)
	}
	seen := map[string]int{}
	for i, ns := range a.Namespaces {
		f := fmt.Sprintf("namespaces[%d]", i)
		if err := checkDNSLabel(ns); err != nil {
			return fe(f, ns, "not a namespace name: %v", err)
		}
		if j, dup := seen[ns]; dup {
			return fe(f, ns, "listed twice (also namespaces[%d])", j)
		}
		seen[ns] = i
	}
	for i, s := range a.NamespaceSelectors {
		if err := validateSelector(fmt.Sprintf("serviceAllocation.namespaceSelectors[%d]", i), s); err != nil {
			return err
		}
	}
	for i, s := range a.ServiceSelectors {
		if err := validateSelector(fmt.Sprintf("serviceAllocation.serviceSelectors[%d]", i), s); err != nil {
			return err
		}
	}
	return nil
}

// ErrStandaloneSelectors is wrapped when a standalone pool carries
// namespace or service selectors: standalone services have no namespace
// and no labels, so the selectors could never admit one.
var ErrStandaloneSelectors = errors.New("selectors apply to Kubernetes Services (cluster mode, IPPool objects); standalone services have no namespace or labels — only serviceAllocation.priority applies here")

// ValidateStandalonePool is Validate for the standalone writer (config
// file and REST API without a cluster): it also refuses selectors.
func ValidateStandalonePool(p *Pool) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return ValidateStandaloneAllocation(p.Allocation)
}

// ValidateStandaloneAllocation checks a standalone pool's
// serviceAllocation: valid, and priority only (ErrStandaloneSelectors).
func ValidateStandaloneAllocation(a *ServiceAllocation) error {
	if err := ValidateAllocation(a); err != nil {
		return err
	}
	if a != nil {
		switch {
		case len(a.Namespaces) > 0:
			return &FieldError{Field: "serviceAllocation.namespaces", Value: strings.Join(a.Namespaces, ","), Err: ErrStandaloneSelectors}
		case len(a.NamespaceSelectors) > 0:
			return &FieldError{Field: "serviceAllocation.namespaceSelectors", Err: ErrStandaloneSelectors}
		case len(a.ServiceSelectors) > 0:
			return &FieldError{Field: "serviceAllocation.serviceSelectors", Err: ErrStandaloneSelectors}
		}
	}
	return nil
}

func validateSelector(field string, s LabelSelector) error {
	fe := func(f, value, format string, args ...any) error {
		return &FieldError{Field: field + f, Value: value, Err: fmt.Errorf(format, args...)}
	}
	for k, v := range s.MatchLabels {
		if err := checkLabelKey(k); err != nil {
			return fe(".matchLabels", k, "bad label key: %v", err)
		}
		if err := checkLabelValue(v); err != nil {
			return fe(".matchLabels."+k, v, "bad label value: %v", err)
		}
	}
	for j, r := range s.MatchExpressions {
		f := fmt.Sprintf(".matchExpressions[%d]", j)
		if err := checkLabelKey(r.Key); err != nil {
			return fe(f+".key", r.Key, "bad label key: %v", err)
		}
		switch r.Operator {
		case OpIn, OpNotIn:
			if len(r.Values) == 0 {
				return fe(f+".values", "", "operator %s needs at least one value", r.Operator)
			}
		case OpExists, OpDoesNotExist:
			if len(r.Values) > 0 {
				return fe(f+".values", strings.Join(r.Values, ","), "operator %s takes no values", r.Operator)
			}
		default:
			return fe(f+".operator", string(r.Operator), "want In, NotIn, Exists or DoesNotExist")
		}
		for k, v := range r.Values {
			if err := checkLabelValue(v); err != nil {
				return fe(fmt.Sprintf("%s.values[%d]", f, k), v, "bad label value: %v", err)
			}
		}
	}
	return nil
}

// Label syntax as the Kubernetes API server enforces it on objects.
func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkLabelValue: empty, or up to 63 of [A-Za-z0-9-_.], alphanumeric at both ends.
func checkLabelValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 {
		return errors.New("longer than 63 characters")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' || (i == 0 || i == len(v)-1) && !isAlnum(c) {
			return errors.New("want up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
		}
	}
	return nil
}

// checkLabelKey: [prefix/]name, prefix a DNS subdomain (253), name a non-empty label value.
func checkLabelKey(k string) error {
	name := k
	if pre, n, ok := strings.Cut(k, "/"); ok {
		if err := ValidateName(pre); err != nil {
			return fmt.Errorf("prefix: %v", err)
		}
		name = n
	}
	if name == "" {
		return errors.New("empty name")
	}
	return checkLabelValue(name)
}

// checkDNSLabel: a namespace name (RFC 1123 label, at most 63 characters).
func checkDNSLabel(s string) error {
	if err := ValidateName(s); err != nil {
		return err
	}
	if len(s) > 63 || strings.Contains(s, ".") {
		return errors.New("want at most 63 lower-case letters, digits or '-'")
	}
	return nil
}
