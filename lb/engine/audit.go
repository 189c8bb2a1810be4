package engine

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/lb/store"
)

// The audit trail is recorded here, in the one writer, rather than at the
// REST boundary: the engine is the only place every accepted change passes
// exactly once — REST writes, the config at start-up and on SIGHUP — and it
// alone knows what an object was before (the boundary sees only the
// request) and whether the change was committed (a refused or failed one
// is not recorded). The boundary hands the identity over in the context
// (audit.WithActor); do carries it onto the engine goroutine.

// auditChanges lists what t changes, object by object, for the actor of
// the operation running; called after the store commit succeeded and
// before the swap (e.pools, e.svcs still hold the before).
func (t *txn) auditChanges() []audit.Change {
	var out []audit.Change
	for _, n := range store.Names(t.poolsChanged) {
		old, had := t.e.pools[n]
		now, has := t.pools[n]
		if c, ok := change("pool/"+n, had, has, reflect.DeepEqual(old, now), func() string { return poolSummary(old) },
			func() string { return poolSummary(now) }); ok {
			out = append(out, c)
		}
	}
	for _, n := range store.Names(t.svcsChanged) {
		old, had := t.origSvcs[n]
		now, has := t.svcs[n]
		same := had && has && reflect.DeepEqual(old.Service, now.Service)
		if c, ok := change("service/"+n, had, has, same, func() string { return serviceSummary(old) },
			func() string { return serviceSummary(now) }); ok {
			out = append(out, c)
		}
	}
	return out
}

func change(obj string, had, has, same bool, before, after func() string) (audit.Change, bool) {
	switch {
	case had && has && same:
		return audit.Change{}, false
	case had && has:
		return audit.Change{Object: obj, Action: audit.Update, Before: before(), After: after()}, true
	case has:
		return audit.Change{Object: obj, Action: audit.Create, After: after()}, true
	case had:
		return audit.Change{Object: obj, Action: audit.Delete, Before: before()}, true
	}
	return audit.Change{}, false
}

// maxSummary bounds a before/after summary (a service with 1,000 backends).
const maxSummary = 600

// poolSummary and serviceSummary are one line each, in the config file's
// words, for a person reading the trail (not a record to restore from).
func poolSummary(p store.Pool) string {
	var b strings.Builder
	b.WriteString("addresses=[")
	for i, r := range p.Ranges {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.String())
	}
	fmt.Fprintf(&b, "] autoAssign=%t avoidBuggyIPs=%t origin=%s", p.AutoAssign, p.AvoidBuggyIPs, p.Origin)
	if a := p.Advertisement; !reflect.DeepEqual(a, lb.Advertisement{}) {
		fmt.Fprintf(&b, " advertisement=%+v", a)
	}
	if p.Allocation != nil {
		fmt.Fprintf(&b, " serviceAllocation=%+v", *p.Allocation)
	}
	return cut(b.String())
}

func serviceSummary(s *service) string {
	sp := &s.Spec
	var b strings.Builder
	if len(sp.VIPs) > 0 {
		fmt.Fprintf(&b, "vips=%v ", sp.VIPs)
	} else {
		fmt.Fprintf(&b, "families=%v ", sp.Families)
	}
	if sp.Pool != "" {
		fmt.Fprintf(&b, "pool=%s ", sp.Pool)
	}
	if sp.SharingKey != "" {
		fmt.Fprintf(&b, "sharingKey=%s ", sp.SharingKey)
	}
	b.WriteString("ports=[")
	for i, p := range sp.Ports {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%s", p.Port, p.Protocol)
		if p.TargetPort != 0 && p.TargetPort != p.Port {
			fmt.Fprintf(&b, "->%d", p.TargetPort)
		}
		if p.NodePort != 0 {
			fmt.Fprintf(&b, " nodePort=%d", p.NodePort)
		}
	}
	b.WriteString("] backends=[")
	for i, be := range sp.Backends {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(be.Addr.String())
		if be.Port != 0 {
			fmt.Fprintf(&b, ":%d", be.Port)
		}
		fmt.Fprintf(&b, "*%d", be.Weight)
	}
	fmt.Fprintf(&b, "] scheduler=%s method=%s", sp.Scheduler, sp.Method)
	if sp.Affinity != 0 {
		fmt.Fprintf(&b, " affinity=%s", sp.Affinity)
	}
	if sp.Health != nil {
		b.WriteString(" healthCheck=on")
	}
	fmt.Fprintf(&b, " origin=%s", s.Origin)
	return cut(b.String())
}

func cut(s string) string {
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	return s
}
