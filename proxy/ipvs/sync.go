package ipvs

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// engine converges the kernel (through handle, device and snatRules) to a
// desired state and keeps the model of what it last programmed. It is not
// safe for concurrent use: Dataplane serialises calls.
//
// Ownership — what edgelb may change or delete — is decided per virtual
// service: a service is edgelb's when its address is bound on edgelb's
// device (edgelb0), or when it is a node-port service (a node address and a
// node port) that edgelb programmed in this process, or that the current
// Config asks for. Everything else in the IPVS table is left alone. Node-port
// services of an earlier run that the current Config no longer has are not
// recognisable after a restart; Cleanup at shutdown removes them.
type engine struct {
	h     handle
	dev   device
	snat  snatRules
	now   func() time.Time
	drain time.Duration
	logf  func(format string, args ...any)

	last     *desired                               // the last applied Config, for Resync
	applied  map[vsKey]*wantService                 // what each service was converged to
	nodeKeys map[vsKey]bool                         // node-port services edgelb programmed
	drains   map[vsKey]map[netip.AddrPort]time.Time // draining destinations and since when
	snatOK   bool                                   // the nftables table was built in this process
	stats    SyncStats
}

// SyncStats counts the kernel changes of the last Apply or Resync.
type SyncStats struct {
	ServicesAdded, ServicesUpdated, ServicesDeleted int
	DestsAdded, DestsUpdated, DestsDeleted          int
	DestsDraining                                   int // destinations left at weight 0, waiting for their connections
	AddrsAdded, AddrsDeleted                        int
}

func newEngine(h handle, dev device, snat snatRules, now func() time.Time, drain time.Duration, logf func(string, ...any)) *engine {
	return &engine{h: h, dev: dev, snat: snat, now: now, drain: drain, logf: logf,
		applied: map[vsKey]*wantService{}, nodeKeys: map[vsKey]bool{}, drains: map[vsKey]map[netip.AddrPort]time.Time{}}
}

// apply converges to d. full reads every owned service's destinations back
// (Resync); otherwise only services whose wanted state changed since the last
// converge, or that have destinations draining, are read.
func (e *engine) apply(ctx context.Context, d *desired, full bool) error {
	e.stats = SyncStats{}
	if err := e.dev.Ensure(); err != nil {
		return err
	}
	haveAddrs, err := e.dev.Addrs()
	if err != nil {
		return err
	}
	// VIPs first so the kernel delivers to the IPVS hook as soon as a service exists.
	for _, a := range sortedAddrs(d.VIPs) {
		if !haveAddrs[a] {
			if err := e.dev.AddAddr(a); err != nil {
				return err
			}
			e.stats.AddrsAdded++
		}
	}
	kernel, err := e.h.Services()
	if err != nil {
		return err
	}
	owned := func(k vsKey) bool {
		return haveAddrs[k.Addr] || d.VIPs[k.Addr] || e.nodeKeys[k] || d.Nodes[k]
	}
	have := map[vsKey]virtualServer{}
	for _, s := range kernel {
		have[s.Key] = s
	}
	var errs []error
	// Deletes first: a service whose address edgelb no longer wants.
	for _, s := range kernel {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, want := d.Services[s.Key]; want || !owned(s.Key) {
			continue
		}
		if err := e.h.DelService(s.Key); err != nil && !isNotExist(err) {
			errs = append(errs, err)
			continue
		}
		e.stats.ServicesDeleted++
		delete(e.applied, s.Key)
		delete(e.drains, s.Key)
		delete(e.nodeKeys, s.Key)
	}
	for _, k := range sortedKeys(d.Services) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w := d.Services[k]
		if d.Nodes[k] {
			e.nodeKeys[k] = true
		}
		hs, exists := have[k]
		readDests := full || !sameWant(e.applied[k], w) || len(e.drains[k]) > 0
		switch {
		case !exists:
			if err := e.h.AddService(w.VS); err != nil {
				errs = append(errs, err)
				continue
			}
			e.stats.ServicesAdded++
			delete(e.drains, k)
			var ok = true
			for _, rs := range w.Dests {
				if err := e.h.AddDest(k, rs); err != nil {
					errs = append(errs, err)
					ok = false
					continue
				}
				e.stats.DestsAdded++
			}
			if ok {
				e.applied[k] = w
			} else {
				delete(e.applied, k)
			}
			continue
		case !sameService(hs, w.VS):
			if err := e.h.UpdateService(w.VS); err != nil {
				errs = append(errs, err)
				delete(e.applied, k)
				continue
			}
			e.stats.ServicesUpdated++
		}
		if !readDests {
			continue
		}
		if err := e.convergeDests(k, w); err != nil {
			errs = append(errs, err)
			delete(e.applied, k)
			continue
		}
		e.applied[k] = w
	}
	for k := range e.nodeKeys {
		if !d.Nodes[k] {
			if _, still := have[k]; !still || !owned(k) {
				delete(e.nodeKeys, k)
			}
		}
	}
	for k := range e.applied {
		if _, ok := d.Services[k]; !ok {
			delete(e.applied, k)
		}
	}
	// Addresses on edgelb0 that no service uses any more.
	for _, a := range sortedAddrs(haveAddrs) {
		if !d.VIPs[a] {
			if err := e.dev.DelAddr(a); err != nil && !isNotExist(err) {
				errs = append(errs, err)
				continue
			}
			e.stats.AddrsDeleted++
		}
	}
	if err := e.snat.Set(d.Front, d.Masq, full || !e.snatOK); err != nil {
		errs = append(errs, err)
		e.snatOK = false
	} else {
		e.snatOK = true
	}
	e.last = d
	for _, m := range e.drains {
		e.stats.DestsDraining += len(m)
	}
	return errors.Join(errs...)
}

// convergeDests makes the kernel's destinations of k match w. Destinations
// not wanted drain: weight 0 first, deleted once they have no connections
// left or the drain timeout passed. UDP has no connection end to wait for,
// so its destinations go at once.
func (e *engine) convergeDests(k vsKey, w *wantService) error {
	kd, err := e.h.Dests(k)
	if err != nil {
		return err
	}
	have := map[netip.AddrPort]realServer{}
	for _, rs := range kd {
		have[rs.Addr] = rs
	}
	var errs []error
	for _, rs := range w.Dests {
		cur, ok := have[rs.Addr]
		switch {
		case !ok:
			if err := e.h.AddDest(k, rs); err != nil {
				errs = append(errs, err)
				continue
			}
			e.stats.DestsAdded++
		case cur.Weight != rs.Weight || cur.Fwd != rs.Fwd:
			if err := e.h.UpdateDest(k, rs); err != nil {
				errs = append(errs, err)
				continue
			}
			e.stats.DestsUpdated++
		}
		if m := e.drains[k]; m != nil {
			delete(m, rs.Addr) // back in service: no longer draining
		}
	}
	want := map[netip.AddrPort]bool{}
	for _, rs := range w.Dests {
		want[rs.Addr] = true
	}
	now := e.now()
	for _, rs := range kd {
		if want[rs.Addr] {
			continue
		}
		m := e.drains[k]
		if m == nil {
			m = map[netip.AddrPort]time.Time{}
			e.drains[k] = m
		}
		since, draining := m[rs.Addr]
		if !draining {
			since = now
		}
		done := k.Proto == proxy.UDP || rs.Active+rs.Inactive == 0 || now.Sub(since) >= e.drain
		if done {
			if err := e.h.DelDest(k, rs); err != nil && !isNotExist(err) {
				errs = append(errs, err)
				continue
			}
			delete(m, rs.Addr)
			e.stats.DestsDeleted++
			continue
		}
		if rs.Weight != 0 {
			q := rs
			q.Weight = 0
			if err := e.h.UpdateDest(k, q); err != nil {
				errs = append(errs, err)
				continue
			}
			e.stats.DestsUpdated++
			e.logf("ipvs: %s: draining %s (%d active, %d inactive connections)", k, rs.Addr, rs.Active, rs.Inactive)
		}
		m[rs.Addr] = since
	}
	if len(e.drains[k]) == 0 {
		delete(e.drains, k)
	}
	return errors.Join(errs...)
}

// cleanup deletes every owned service, the device and the nftables table.
func (e *engine) cleanup() error {
	var errs []error
	addrs, err := e.dev.Addrs()
	if err != nil {
		errs = append(errs, err)
	}
	if kernel, err := e.h.Services(); err != nil {
		errs = append(errs, err)
	} else {
		for _, s := range kernel {
			lastNode := e.last != nil && e.last.Nodes[s.Key]
			if addrs[s.Key.Addr] || e.nodeKeys[s.Key] || lastNode {
				if err := e.h.DelService(s.Key); err != nil && !isNotExist(err) {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := e.dev.Delete(); err != nil {
		errs = append(errs, err)
	}
	if err := e.snat.Delete(); err != nil {
		errs = append(errs, err)
	}
	e.applied = map[vsKey]*wantService{}
	e.nodeKeys = map[vsKey]bool{}
	e.drains = map[vsKey]map[netip.AddrPort]time.Time{}
	e.snatOK = false
	e.last = nil
	return errors.Join(errs...)
}

func sortedAddrs(m map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func sortedKeys[V any](m map[vsKey]V) []vsKey {
	out := make([]vsKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i], out[j]) })
	return out
}

func keyLess(a, b vsKey) bool {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c < 0
	}
	if a.Proto != b.Proto {
		return a.Proto < b.Proto
	}
	return a.Port < b.Port
}
