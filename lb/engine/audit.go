package engine

import (
	"encoding/json"
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

func poolSummary(p store.Pool) string {
	rs := make([]string, len(p.Ranges))
	for i, r := range p.Ranges {
		rs[i] = r.String()
	}
	v := struct {
		Addresses []string     `json:"addresses"`
		Origin    store.Origin `json:"origin"`
		Pool      lb.Pool      `json:"pool"`
	}{rs, p.Origin, p.Pool}
	return summary(v)
}

func serviceSummary(s *service) string {
	return summary(struct {
		Origin store.Origin   `json:"origin"`
		Spec   lb.ServiceSpec `json:"spec"`
	}{s.Origin, s.Spec})
}

func summary(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	s := string(b)
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	return s
}
