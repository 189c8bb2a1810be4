package lb

import (
	"errors"
	"strings"
	"testing"
)

// labelSet parses "k=v,k2=v2" (nil for "").
func labelSet(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

func withAlloc(p Pool, a ServiceAllocation) Pool {
	p.Allocation = &a
	return p
}

// selectorPools: one pool of each kind MetalLB's serviceAllocation allows.
func selectorPools(t *testing.T) []Pool {
	return []Pool{
		pool(t, "cheap", true, false, "10.0.0.0/30"), // no serviceAllocation
		withAlloc(pool(t, "first", true, false, "10.9.0.1/32"), ServiceAllocation{Priority: 1}),
		withAlloc(pool(t, "blue", true, false, "10.1.0.0/31"), ServiceAllocation{Priority: 10, Namespaces: []string{"blue"}}),
		withAlloc(pool(t, "gold", true, false, "10.2.0.0/31"), ServiceAllocation{Priority: 5,
			NamespaceSelectors: []LabelSelector{{MatchLabels: map[string]string{"tier": "gold"}}}}),
		withAlloc(pool(t, "web", true, false, "10.3.0.0/31"), ServiceAllocation{
			ServiceSelectors: []LabelSelector{{MatchExpressions: []LabelRequirement{{Key: "app", Operator: OpIn, Values: []string{"web"}}}}}}),
		withAlloc(pool(t, "manual", false, false, "10.4.0.0/31"), ServiceAllocation{Namespaces: []string{"blue"}}),
	}
}

// TestServiceAllocation is the step table for pool selectors and priority
// (MetalLB's serviceAllocation): which pool an automatic assignment comes
// from, explicit pools and requested IPs, and held addresses re-checked.
func TestServiceAllocation(t *testing.T) {
	a := NewAllocator()
	if err := a.SetPools(selectorPools(t)); err != nil {
		t.Fatal(err)
	}
	runSteps(t, a, []step{
		{desc: "priority 1 without selectors admits everyone, first", op: "alloc", svc: "s0", ns: "other", ip: "10.9.0.1"},
		{desc: "no pool with rules admits: the pools without rules", op: "alloc", svc: "s1", ns: "other", ip: "10.0.0.0"},
		{desc: "namespace listed: its pool before the ones without rules", op: "alloc", svc: "s2", ns: "blue", ip: "10.1.0.0"},
		{desc: "namespace labelled tier=gold: priority 5 beats 10", op: "alloc", svc: "s3", ns: "blue", nsLabels: "tier=gold", ip: "10.2.0.0"},
		{desc: "a set priority (10) beats an unset one (web)", op: "alloc", svc: "s4", ns: "blue", labels: "app=web", ip: "10.1.0.1"},
		{desc: "blue full: next admitting pool, unset priority", op: "alloc", svc: "s5", ns: "blue", labels: "app=web", ip: "10.3.0.0"},
		{desc: "service selector in any namespace", op: "alloc", svc: "s6", ns: "other", labels: "app=web", ip: "10.3.0.1"},
		{desc: "admitting pools full: falls back to pools without rules", op: "alloc", svc: "s7", ns: "other", labels: "app=web", ip: "10.0.0.1"},

		{desc: "explicit pool that excludes the service: refused", op: "alloc", svc: "s8", ns: "other", pool: "blue", want: notAdmittedErr},
		{desc: "explicit pool wins over autoAssign false when admitted", op: "alloc", svc: "s8", ns: "blue", pool: "manual", ip: "10.4.0.0"},
		{desc: "explicit non-auto pool excluding the service: refused", op: "alloc", svc: "s9", ns: "other", pool: "manual", want: notAdmittedErr},
		{desc: "requested IP in a pool excluding the service: refused", op: "assign", svc: "s9", ns: "other", ip: "10.4.0.1", want: notAdmittedErr},
		{desc: "requested IP in a pool admitting it", op: "assign", svc: "s9", ns: "blue", ip: "10.4.0.1"},
		{desc: "requested IP in a pool without rules", op: "assign", svc: "s10", ns: "other", ip: "10.0.0.2"},

		// s5's labels change (app=api): web no longer admits it.
		{desc: "held address re-checked: no longer admitted", op: "admitted", svc: "s5", ns: "blue", labels: "app=api", ip: "10.3.0.0", want: notAdmittedErr},
		{desc: "still admitted under its old labels", op: "admitted", svc: "s5", ns: "blue", labels: "app=web", ip: "10.3.0.0"},
		{desc: "Assign keeps a held address (the mover decides)", op: "assign", svc: "s5", ns: "blue", labels: "app=api", ip: "10.3.0.0"},
		{desc: "Allocate moves it to an admitting pool", op: "alloc", svc: "s5", ns: "blue", labels: "app=api", ip: "10.0.0.3"},
		{desc: "its old address was released by the move", op: "alloc", svc: "s11", ns: "other", labels: "app=web", ip: "10.3.0.0"},
		{desc: "priority does not move what is held: s2 stays in blue", op: "alloc", svc: "s2", ns: "blue", nsLabels: "tier=gold", ip: "10.1.0.0"},

		{desc: "adoption skips selectors (a new leader keeps it)", op: "adopt", svc: "s12", ns: "other", ip: "10.2.0.1"},
		{desc: "adopted but not admitted: the caller moves it", op: "admitted", svc: "s12", ns: "other", ip: "10.2.0.1", want: notAdmittedErr},
		{desc: "nothing admitting is free", op: "alloc", svc: "s13", ns: "other", want: exhaustedErr},
	})
}

// TestServiceAllocationPriorityChange: a new pool set with other
// priorities keeps every assignment and only reorders new choices.
func TestServiceAllocationPriorityChange(t *testing.T) {
	a := NewAllocator()
	ps := selectorPools(t)
	if err := a.SetPools(ps); err != nil {
		t.Fatal(err)
	}
	runSteps(t, a, []step{
		{desc: "s0 takes the one address of first", op: "alloc", svc: "s0", ip: "10.9.0.1"},
		{desc: "gold (5) before blue (10)", op: "alloc", svc: "s1", ns: "blue", nsLabels: "tier=gold", ip: "10.2.0.0"},
	})
	ps[2].Allocation.Priority = 2 // blue
	if err := a.SetPools(ps); err != nil {
		t.Fatal(err)
	}
	runSteps(t, a, []step{
		{desc: "s1 keeps its gold address", op: "alloc", svc: "s1", ns: "blue", nsLabels: "tier=gold", ip: "10.2.0.0"},
		{desc: "blue (2) now before gold (5)", op: "alloc", svc: "s2", ns: "blue", nsLabels: "tier=gold", ip: "10.1.0.0"},
	})
}

func TestValidateServiceAllocation(t *testing.T) {
	base := func(a ServiceAllocation) *Pool {
		p := withAlloc(pool(t, "p", true, false, "192.0.2.0/28"), a)
		return &p
	}
	sel := func(k, op string, vals ...string) []LabelSelector {
		return []LabelSelector{{MatchExpressions: []LabelRequirement{{Key: k, Operator: SelectorOp(op), Values: vals}}}}
	}
	for _, c := range []struct {
		a     ServiceAllocation
		field string // "" = valid
	}{
		{ServiceAllocation{Priority: 3, Namespaces: []string{"a", "b-2"}}, ""},
		{ServiceAllocation{ServiceSelectors: sel("example.com/app", "NotIn", "x", "y")}, ""},
		{ServiceAllocation{NamespaceSelectors: []LabelSelector{{MatchLabels: map[string]string{"team": ""}}}}, ""},
		{ServiceAllocation{NamespaceSelectors: []LabelSelector{{}}}, ""},
		{ServiceAllocation{Priority: -1}, "serviceAllocation.priority"},
		{ServiceAllocation{Namespaces: []string{"Blue"}}, "serviceAllocation.namespaces[0]"},
		{ServiceAllocation{Namespaces: []string{"a.b"}}, "serviceAllocation.namespaces[0]"},
		{ServiceAllocation{Namespaces: []string{"a", "a"}}, "serviceAllocation.namespaces[1]"},
		{ServiceAllocation{ServiceSelectors: sel("app", "Equals", "x")}, "serviceAllocation.serviceSelectors[0].matchExpressions[0].operator"},
		{ServiceAllocation{ServiceSelectors: sel("app", "In")}, "serviceAllocation.serviceSelectors[0].matchExpressions[0].values"},
		{ServiceAllocation{ServiceSelectors: sel("app", "Exists", "x")}, "serviceAllocation.serviceSelectors[0].matchExpressions[0].values"},
		{ServiceAllocation{ServiceSelectors: sel("-app", "Exists")}, "serviceAllocation.serviceSelectors[0].matchExpressions[0].key"},
		{ServiceAllocation{ServiceSelectors: sel("app", "In", "a b")}, "serviceAllocation.serviceSelectors[0].matchExpressions[0].values[0]"},
		{ServiceAllocation{NamespaceSelectors: []LabelSelector{{MatchLabels: map[string]string{"a/b/c": "x"}}}}, "serviceAllocation.namespaceSelectors[0].matchLabels"},
		{ServiceAllocation{NamespaceSelectors: []LabelSelector{{MatchLabels: map[string]string{"k": "-x"}}}}, "serviceAllocation.namespaceSelectors[0].matchLabels.k"},
	} {
		err := base(c.a).Validate()
		var fe *FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", c.a, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%+v: want a FieldError on %s, got %v", c.a, c.field, err)
		}
	}
	// Standalone services have no namespace or labels: selectors refused, priority kept.
	if err := ValidateStandalonePool(base(ServiceAllocation{Priority: 4}), nil); err != nil {
		t.Errorf("standalone priority: %v", err)
	}
	for f, a := range map[string]ServiceAllocation{
		"serviceAllocation.namespaces":         {Namespaces: []string{"a"}},
		"serviceAllocation.namespaceSelectors": {NamespaceSelectors: []LabelSelector{{}}},
		"serviceAllocation.serviceSelectors":   {ServiceSelectors: sel("app", "Exists")},
	} {
		err := ValidateStandalonePool(base(a), nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != f || !errors.Is(err, ErrStandaloneSelectors) {
			t.Errorf("standalone %s: got %v", f, err)
		}
	}
}

func TestLabelSelectorMatches(t *testing.T) {
	s := LabelSelector{MatchLabels: map[string]string{"a": "1"}, MatchExpressions: []LabelRequirement{
		{Key: "b", Operator: OpNotIn, Values: []string{"x"}}, {Key: "c", Operator: OpDoesNotExist}}}
	for labels, want := range map[string]bool{"a=1": true, "a=1,b=y": true, "a=1,b=x": false, "a=2": false, "a=1,c=": false, "": false} {
		if got := s.Matches(labelSet(labels)); got != want {
			t.Errorf("Matches(%q) = %v, want %v", labels, got, want)
		}
	}
	if !(LabelSelector{}).Matches(nil) {
		t.Error("an empty selector must match everything")
	}
}
