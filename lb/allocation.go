package lb

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
)

// ServiceAllocation narrows which services a pool serves and orders it
// among the pools that do (MetalLB's IPAddressPool spec.serviceAllocation,
// with its semantics):
//
//   - Namespaces and NamespaceSelectors: when either is set, a service's
//     namespace must be listed or carry labels one of the selectors matches.
//   - ServiceSelectors: when set, the service's labels must match one.
//   - Both constraints must hold when both are set.
//   - Priority: lower number first; 0 means unset and comes after every set
//     priority. Pools with an allocation that admits the service are tried
//     before every pool without one.
//
// A pool's allocation is checked when an address is picked or requested,
// and against the addresses a service holds (see Allocator.Admitted);
// priority only orders the choice of a new address.
type ServiceAllocation struct {
	Priority           int             `json:"priority,omitempty"`
	Namespaces         []string        `json:"namespaces,omitempty"`
	NamespaceSelectors []LabelSelector `json:"namespaceSelectors,omitempty"`
	ServiceSelectors   []LabelSelector `json:"serviceSelectors,omitempty"`
}

// LabelSelector is Kubernetes' label selector: every MatchLabels pair and
// every expression must hold; an empty selector matches everything.
type LabelSelector struct {
	MatchLabels      map[string]string  `json:"matchLabels,omitempty"`
	MatchExpressions []LabelRequirement `json:"matchExpressions,omitempty"`
}

// SelectorOp is a label requirement's operator.
type SelectorOp string

const (
	OpIn           SelectorOp = "In"
	OpNotIn        SelectorOp = "NotIn"
	OpExists       SelectorOp = "Exists"
	OpDoesNotExist SelectorOp = "DoesNotExist"
)

// LabelRequirement is one matchExpressions entry.
type LabelRequirement struct {
	Key      string     `json:"key"`
	Operator SelectorOp `json:"operator"`
	Values   []string   `json:"values,omitempty"`
}

// Matches reports whether labels satisfy the selector (Kubernetes' rules:
// NotIn and DoesNotExist hold for an absent key).
func (s LabelSelector) Matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := labels[r.Key]
		switch r.Operator {
		case OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case OpExists:
			if !ok {
				return false
			}
		case OpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false // refused by the validator; never matches
		}
	}
	return true
}

// HasSelectors reports whether the allocation constrains namespaces or
// service labels (beyond ordering by priority).
func (a *ServiceAllocation) HasSelectors() bool {
	return a != nil && (len(a.Namespaces) > 0 || len(a.NamespaceSelectors) > 0 || len(a.ServiceSelectors) > 0)
}

// ErrNotAdmitted is wrapped by NotAdmittedError; match with errors.Is.
var ErrNotAdmitted = errors.New("the pool's serviceAllocation does not admit the service")

// NotAdmittedError is a service asking for (or holding) an address of a
// pool whose serviceAllocation excludes it.
type NotAdmittedError struct {
	Pool    string
	Service string
	Reason  string // which constraint failed
}

func (e *NotAdmittedError) Error() string {
	return fmt.Sprintf("pool %q does not admit service %q: %s", e.Pool, e.Service, e.Reason)
}

func (e *NotAdmittedError) Is(target error) bool { return target == ErrNotAdmitted }

// admits returns nil when the pool's allocation admits the service req
// describes, else why not. A pool without an allocation admits everyone.
func (p *Pool) admits(svc string, req Request) error {
	a := p.Allocation
	if !a.HasSelectors() {
		return nil
	}
	no := func(why string) error { return &NotAdmittedError{Pool: p.Name, Service: svc, Reason: why} }
	if len(a.Namespaces) > 0 || len(a.NamespaceSelectors) > 0 {
		ok := slices.Contains(a.Namespaces, req.Namespace)
		for i := 0; !ok && i < len(a.NamespaceSelectors); i++ {
			ok = a.NamespaceSelectors[i].Matches(req.NamespaceLabels)
		}
		if !ok {
			ns := req.Namespace
			if ns == "" {
				ns = "(none: standalone)"
			}
			return no(fmt.Sprintf("namespace %s is neither in serviceAllocation.namespaces nor matched by serviceAllocation.namespaceSelectors", ns))
		}
	}
	if len(a.ServiceSelectors) > 0 {
		ok := false
		for i := 0; !ok && i < len(a.ServiceSelectors); i++ {
			ok = a.ServiceSelectors[i].Matches(req.Labels)
		}
		if !ok {
			return no("its labels match none of serviceAllocation.serviceSelectors")
		}
	}
	return nil
}

// autoOrder sorts the auto-assign candidates MetalLB's way: pools with an
// allocation first (set priorities ascending, then unset ones), then pools
// without one; name breaks ties so the order never depends on map order.
func autoOrder(ps []*poolState) {
	rank := func(p *poolState) (int, int) {
		switch {
		case p.Allocation == nil:
			return 2, 0
		case p.Allocation.Priority > 0:
			return 0, p.Allocation.Priority
		}
		return 1, 0
	}
	sort.SliceStable(ps, func(i, j int) bool {
		ci, pi := rank(ps[i])
		cj, pj := rank(ps[j])
		if ci != cj {
			return ci < cj
		}
		if pi != pj {
			return pi < pj
		}
		return ps[i].Name < ps[j].Name
	})
}

// Admitted returns nil when ip's pool admits the service req describes (or
// ip is in no pool: that is ReplacePools' orphan case), else a
// *NotAdmittedError. Callers holding ip use it to move a service whose
// labels or namespace no longer fit (make before break, via Allocate).
func (a *Allocator) Admitted(svc string, ip netip.Addr, req Request) error {
	rs := a.rangeOf(ip)
	if rs == nil {
		return nil
	}
	return rs.pool.admits(svc, req)
}

func cloneAllocation(a *ServiceAllocation) *ServiceAllocation {
	if a == nil {
		return nil
	}
	c := *a
	c.Namespaces = slices.Clone(a.Namespaces)
	c.NamespaceSelectors = cloneSelectors(a.NamespaceSelectors)
	c.ServiceSelectors = cloneSelectors(a.ServiceSelectors)
	return &c
}

func cloneSelectors(ss []LabelSelector) []LabelSelector {
	if ss == nil {
		return nil
	}
	out := make([]LabelSelector, len(ss))
	for i, s := range ss {
		out[i].MatchLabels = maps.Clone(s.MatchLabels)
		for _, r := range s.MatchExpressions {
			r.Values = slices.Clone(r.Values)
			out[i].MatchExpressions = append(out[i].MatchExpressions, r)
		}
	}
	return out
}

// Normalize drops empty lists and maps (nil and empty mean the same; one
// form lets parsed and rendered allocations compare equal).
func (a *ServiceAllocation) Normalize() {
	if a == nil {
		return
	}
	if len(a.Namespaces) == 0 {
		a.Namespaces = nil
	}
	norm := func(ss []LabelSelector) []LabelSelector {
		if len(ss) == 0 {
			return nil
		}
		for i := range ss {
			if len(ss[i].MatchLabels) == 0 {
				ss[i].MatchLabels = nil
			}
			if len(ss[i].MatchExpressions) == 0 {
				ss[i].MatchExpressions = nil
			}
			for j := range ss[i].MatchExpressions {
				if len(ss[i].MatchExpressions[j].Values) == 0 {
					ss[i].MatchExpressions[j].Values = nil
				}
			}
		}
		return ss
	}
	a.NamespaceSelectors = norm(a.NamespaceSelectors)
	a.ServiceSelectors = norm(a.ServiceSelectors)
}
