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
// node port) or a firewall-mark service (a mark and a family) that edgelb
// programmed in this process, or that the current Config asks for. Everything
// else in the IPVS table — a firewall-mark service of another mark, say
// keepalived's — is left alone. Node-port and firewall-mark services of an
// earlier run that the current Config no longer has are not recognisable
// after a restart; Cleanup at shutdown removes them.
type engine struct {
	h     handle
	dev   device
	snat  snatRules
	now   func() time.Time
	drain time.Duration
	logf  func(format string, args ...any)

	last    *desired                               // the last applied Config, for Resync
	applied map[vsKey]*wantService                 // what each service was converged to
	keyed   map[vsKey]bool                         // node-port and fwmark services edgelb programmed
	drains  map[vsKey]map[netip.AddrPort]time.Time // draining destinations and since when
	snatOK  bool                                   // the nftables table was built in this process
	stats   SyncStats

	// The resync's rotating window (see readMode): spread is how many
	// resyncs it takes to read every service's destinations, cursor where
	// the next window starts in the sorted service keys, fullEvery how many
	// resyncs pass between unconditional read-everything-and-rebuild passes,
	// resyncs counts them.
	spread, cursor, fullEvery, resyncs int
}

// readMode says how much of the kernel a converge reads back.
//
// IPVS has no generation number and no change notifications (its generic
// netlink family has no multicast group), so a resync cannot learn cheaply
// that nothing changed, as the nft dataplane does. What is cheap is one dump
// of the service table — a service deleted or changed by hand shows there —
// and what is dear is one dump per service for its destinations (10,000
// round trips at 10,000 services). So a resync reads the destinations of a
// rotating window of 1/spread of the services, plus every service whose
// wanted state changed or that has destinations draining: a hand edit of a
// real server is repaired within spread resyncs, and a resync costs the
// service dump plus n/spread destination dumps instead of n. The nftables
// table is rebuilt only when the ruleset generation says someone else
// committed (snatRules.Set's verify).
type readMode int

const (
	readChanged readMode = iota // Apply: what changed since the last converge, and drains
	readWindow                  // Resync: also the next window of services, and verify the nft table
	readAll                     // every service, and rebuild the nft table (the safety net)
)

// Default resync spread and safety-net period.
const (
	// DefaultResyncSpread: every service's destinations are read back at
	// least once every 8 resyncs (4 min at the daemon's 30 s interval).
	DefaultResyncSpread = 8
	// DefaultFullEvery: every 120th resync reads everything and rebuilds
	// the nftables table regardless (one an hour at 30 s), as the nft
	// dataplane does: a net under the reasoning above, not under drift.
	DefaultFullEvery = 120
)

// SyncStats counts the kernel changes of the last Apply or Resync.
type SyncStats struct {
	ServicesAdded, ServicesUpdated, ServicesDeleted int
	DestsAdded, DestsUpdated, DestsDeleted          int
	DestsDraining                                   int // destinations left at weight 0, waiting for their connections
	AddrsAdded, AddrsDeleted                        int
	// What the converge read: destination dumps (one per service read),
	// whether it was a read-everything pass, and whether the nftables table
	// was rebuilt whole.
	DestReads  int
	Full       bool
	NFTRebuilt bool
}

func newEngine(h handle, dev device, snat snatRules, now func() time.Time, drain time.Duration, logf func(string, ...any)) *engine {
	return &engine{h: h, dev: dev, snat: snat, now: now, drain: drain, logf: logf,
		applied: map[vsKey]*wantService{}, keyed: map[vsKey]bool{}, drains: map[vsKey]map[netip.AddrPort]time.Time{},
		spread: DefaultResyncSpread, fullEvery: DefaultFullEvery}
}

// resync converges to the last applied state: a window pass, or every
// fullEvery-th time a read-everything pass.
func (e *engine) resync(ctx context.Context) error {
	e.resyncs++
	mode := readWindow
	if e.fullEvery > 0 && e.resyncs%e.fullEvery == 0 {
		mode = readAll
	}
	return e.apply(ctx, e.last, mode)
}

// window returns which of n sorted services this resync reads (an index
// test) and advances the cursor: ceil(n/spread) services from the cursor on,
// wrapping around.
func (e *engine) window(n int) func(i int) bool {
	spread := max(e.spread, 1)
	if n == 0 {
		return func(int) bool { return false }
	}
	size := (n + spread - 1) / spread
	start := e.cursor % n
	e.cursor = (start + size) % n
	return func(i int) bool { return (i-start+n)%n < size }
}

// apply converges to d, reading back what mode says (see readMode).
func (e *engine) apply(ctx context.Context, d *desired, mode readMode) error {
	e.stats = SyncStats{Full: mode == readAll}
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
		return haveAddrs[k.Addr] || d.VIPs[k.Addr] || e.keyed[k] || d.Keyed[k]
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
		delete(e.keyed, s.Key)
	}
	keys := sortedKeys(d.Services)
	inWindow := func(int) bool { return false }
	if mode == readWindow {
		inWindow = e.window(len(keys))
	}
	for i, k := range keys {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w := d.Services[k]
		if d.Keyed[k] {
			e.keyed[k] = true
		}
		hs, exists := have[k]
		readDests := mode == readAll || inWindow(i) || !sameWant(e.applied[k], w) || len(e.drains[k]) > 0
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
	for k := range e.keyed {
		if !d.Keyed[k] {
			if _, still := have[k]; !still || !owned(k) {
				delete(e.keyed, k)
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
	how := snatDiff
	switch {
	case mode == readAll || !e.snatOK:
		how = snatRebuild
	case mode == readWindow:
		how = snatVerify
	}
	if rebuilt, err := e.snat.Set(d.Front, d.Masq, how); err != nil {
		errs = append(errs, err)
		e.snatOK = false
	} else {
		e.snatOK = true
		e.stats.NFTRebuilt = rebuilt
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
	e.stats.DestReads++
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
			lastNode := e.last != nil && e.last.Keyed[s.Key]
			if addrs[s.Key.Addr] || e.keyed[s.Key] || lastNode {
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
	e.keyed = map[vsKey]bool{}
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
	if a.Mark != b.Mark {
		return a.Mark < b.Mark
	}
	if a.Proto != b.Proto {
		return a.Proto < b.Proto
	}
	return a.Port < b.Port
}
