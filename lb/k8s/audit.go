package k8s

import (
	"net/netip"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
)

// In cluster mode the controller is the writer (issue 36): what it acts on —
// addresses assigned to or released from a Service, IPPools taken into use,
// changed or dropped — goes to the same audit trail as the standalone
// engine's commits. Kubernetes' own audit log knows who edited an object;
// this trail records what the gateway did about it, naming the object's last
// field manager (kubectl-client-side-apply, helm, ...) as far as the object
// still tells.

// auditActor is the controller as an actor, with the manager that last
// changed obj (nil: the object is gone).
func auditActor(obj metav1.Object) audit.Actor {
	id := "kubernetes"
	if m := lastManager(obj); m != "" {
		id += "/" + m
	}
	return audit.Actor{Identity: id, Source: "kubernetes"}
}

// lastManager is the manager of the newest managedFields entry.
func lastManager(obj metav1.Object) string {
	if obj == nil {
		return ""
	}
	var best string
	var at metav1.Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && (best == "" || !f.Time.Before(&at)) {
			best, at = f.Manager, *f.Time
		}
	}
	return best
}

// auditService records a change of key's addresses (nothing when equal).
func (c *Controller) auditService(obj metav1.Object, key string, before, after []netip.Addr) {
	if c.opts.Audit == nil || addrsString(before) == addrsString(after) {
		return
	}
	ch := audit.Change{Object: "service/" + key, Action: audit.Update, Before: addrsString(before), After: addrsString(after)}
	switch {
	case len(before) == 0:
		ch.Action, ch.Before = audit.Create, ""
	case len(after) == 0:
		ch.Action, ch.After = audit.Delete, ""
	}
	c.opts.Audit.Record(auditActor(obj), []audit.Change{ch})
}

// auditPools records the IPPools that came into use, changed or went out
// of use between two sets of valid pools. obj finds a pool's object (for its
// manager); nil when it is gone.
func (c *Controller) auditPools(before, after []lb.Pool, obj func(name string) metav1.Object) {
	if c.opts.Audit == nil {
		return
	}
	old := map[string]string{}
	for _, p := range before {
		old[p.Name] = poolSummary(p)
	}
	var names []string
	now := map[string]string{}
	for _, p := range after {
		now[p.Name] = poolSummary(p)
		names = append(names, p.Name)
	}
	for n := range old {
		if _, ok := now[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b, hadB := old[n]
		a, hasA := now[n]
		ch := audit.Change{Object: "ippool/" + n, Before: b, After: a}
		switch {
		case !hadB:
			ch.Action, ch.Before = audit.Create, ""
		case !hasA:
			ch.Action, ch.After = audit.Delete, ""
		case a == b:
			continue
		default:
			ch.Action = audit.Update
		}
		c.opts.Audit.Record(auditActor(obj(n)), []audit.Change{ch})
	}
}

func addrsString(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	sort.Strings(s)
	if len(s) == 0 {
		return ""
	}
	return "addresses " + strings.Join(s, ", ")
}

func poolSummary(p lb.Pool) string {
	s := "addresses " + strings.Join(p.RangeStrings(), ", ")
	if !p.AutoAssign {
		s += "; autoAssign false"
	}
	if p.AvoidBuggyIPs {
		s += "; avoidBuggyIPs"
	}
	return s
}
