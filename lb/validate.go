package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
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
	// MaxRiseFall bounds a health check's rise and fall.
	MaxRiseFall = 1000
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
	// FWMarks maps every firewall mark in use to the service holding it
	// (filled by the writer): a mark is one service's.
	FWMarks map[uint32]string
	// Dataplane, when non-nil, is the dataplane's own verdict on what it
	// can program (nft.Check: no lc, wlc, sed, nq; IPVS: nil, it does all):
	// the service's scheduler and method are probed with it, so a service
	// the kernel would refuse is refused here, under "scheduler"/"method",
	// with the dataplane's reason (wrapping proxy.ErrUnsupported) — from
	// REST, the config file (dataplane.mode nftables) and reloads alike.
	Dataplane func(proxy.Service) error
	// SingleVIP: the VIP was written as vip: (errors name "vip", not "vips[0]").
	SingleVIP bool
	// Own are the gateway's own addresses (nil: none known): never a VIP
	// or a backend (ErrOwnAddress).
	Own *OwnAddrs
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
	if len(s.VIPs) == 0 && len(s.Families) == 0 && s.FWMark == 0 {
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
// file and REST API without a cluster): it also refuses selectors and a
// range holding one of own (the gateway's own addresses; nil: none).
func ValidateStandalonePool(p *Pool, own *OwnAddrs) error {
	if err := ValidatePool(p, own); err != nil {
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
