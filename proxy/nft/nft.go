// Package nft is the nftables implementation of proxy.Dataplane, programmed
// over netlink with github.com/google/nftables (no nft process at run time).
// It owns two tables (ip edgelb, ip6 edgelb) and touches nothing else. See
// README.md for the layout and why it is flat and data-driven.
package nft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// DefaultTable names the ip and ip6 tables the dataplane owns.
const DefaultTable = "edgelb"

// Options configure a Dataplane.
type Options struct {
	// NetNS is an open network-namespace fd to program (0: the caller's own).
	NetNS int
	// Table names the ip and ip6 tables (default DefaultTable).
	Table string
	// Log receives warnings (default: discarded).
	Log *slog.Logger
	// FullEvery: every FullEvery-th Resync reads the tables back in full even
	// when the ruleset generation says nothing changed (0: DefaultFullEvery;
	// 1: every Resync reads back, the behaviour before the gate).
	FullEvery int
	// SourceAddresses (at most one per family) are what method nat
	// translates the client's address to instead of masquerading to the
	// gateway's own: floating addresses owned with the VIPs
	// (announce.l2.sourceAddresses), so replies reach the current owner.
	SourceAddresses []netip.Addr
	// SyncEvents limits the conntrack events of the connections edgelb
	// translates to assured and destroy (nft `ct event set`), for a state
	// sync (conntrackd) that would otherwise receive and send every TCP
	// state change: two events a connection instead of eight. What a peer
	// then holds for an open connection is its state once established,
	// which is what a takeover needs; each event must reach the peer
	// (unicast FTFW), as no later one repairs a lost one.
	SyncEvents bool

	// Tests only: the receive buffer to force (bytes, before the kernel
	// doubles it) and the messages per batch, instead of what dial derives.
	rcvbuf, maxMsgs int
}

// Stats counts what the dataplane sent to the kernel.
type Stats struct {
	Batches  uint64 // netlink batches (transactions) flushed
	Messages uint64 // nftables messages in them
	Elements uint64 // set elements added or deleted
	Reads    uint64 // full read-backs of the table (first Apply, Resync, repair)
	Resyncs  uint64 // Resync calls
	Gated    uint64 // of them, answered by the generation gate (nothing committed since the kernel equalled the model)
	// GatedForeign: of Gated, those where others had committed meanwhile,
	// but only to other tables (as the change monitor saw).
	GatedForeign uint64
	// MaxMessages is the most messages one transaction carried: each is
	// acknowledged, so it stays within what the receive buffer holds.
	MaxMessages uint64
}

// Dataplane is the nftables dataplane. It is safe for concurrent use.
type Dataplane struct {
	mu      sync.Mutex
	opts    Options
	tables  [2]*nftables.Table // ip, ip6
	fams    [2]fam             // fams with this dataplane's source addresses
	conn    *nftables.Conn
	budget  int // bytes of elements per batch (what the socket's send buffer takes)
	maxMsgs int // messages per transaction (their acknowledgements must fit the receive buffer)
	rcvbuf  int // the socket's receive buffer, as the kernel reports it
	closed  bool

	// The model: what the kernel holds when !dirty.
	svcs   map[proxy.Key]*svcState
	fronts map[frontend]proxy.Key
	nodes  map[netip.Addr]bool
	chains map[famChain]int // pick-* and post-* chains → services using them
	nextID uint32           // the number (low bits) of the next id allocID hands out
	// hints maps a frontend element found in the kernel at the first sync to
	// its service id, so a restarted daemon keeps ids (and affinity entries)
	// instead of rewriting every element.
	hints  map[string]uint32
	hintBE map[uint32]map[uint32]string // id → bucket → backend, as found
	gen    uint64                       // Apply counter, marks the services a Config names
	order  []*svcState                  // the last Config's services, in its order (nil: refused or unknown)
	good   []*svcState                  // order as of the last Apply the kernel took (isolate.go)
	// kernelRefused are changes the kernel refused (isolate.go), not tried
	// again while the Config asks for the very same input.
	kernelRefused map[proxy.Key]refusedChange
	synced        bool // the kernel was read back since New or Cleanup
	dirty         bool // a write failed: the kernel may differ from the model
	stats         Stats

	// The generation gate (gen.go): a second netlink socket for GETGEN, the
	// transactions this dataplane committed, and the generation at which the
	// kernel last equalled the model.
	genConn *netlink.Conn
	commits uint64
	clean   genGate
	mon     *monitor
	portid  atomic.Uint32 // conn's netlink port id: its own notifications are not foreign
}

var _ proxy.Dataplane = (*Dataplane)(nil)

// New opens a netlink connection to nf_tables (in opts.NetNS when set). It
// fails with proxy.ErrKernelFeature when the kernel has no nf_tables.
func New(opts Options) (*Dataplane, error) {
	if proxy.CTMarkMask != 0xffffffff {
		// The service id rides in the whole ct mark between the hooks.
		return nil, fmt.Errorf("nft: needs the whole ct mark (proxy.CTMarkMask is %#x)", proxy.CTMarkMask)
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dataplane{opts: opts, fams: fams}
	for i := range d.fams {
		d.fams[i].syncEvents = opts.SyncEvents
		for _, a := range opts.SourceAddresses {
			if a = a.Unmap(); a.IsValid() && a.Is6() == d.fams[i].v6 {
				d.fams[i].snat = a
			}
		}
	}
	for i, f := range d.fams {
		d.tables[i] = &nftables.Table{Family: f.family, Name: opts.Table}
	}
	d.reset()
	if err := d.dial(); err != nil {
		return nil, err
	}
	gc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: opts.NetNS})
	if err != nil {
		d.conn.CloseLasting()
		return nil, kernelErr("nft: open netlink for the ruleset generation", err)
	}
	d.genConn = gc
	if m, err := newMonitor(opts.NetNS, opts.Table, d.portid.Load); err == nil {
		d.mon = m
	} else {
		// Without it the generation gate still works; foreign commits to
		// other tables then cost a full read.
		opts.Log.Warn("nft: no change monitor; resyncs read back after any nf_tables commit", "err", err)
	}
	if _, err := d.conn.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		d.conn.CloseLasting()
		return nil, kernelErr("nft: list tables", err)
	}
	return d, nil
}

// kernelErr wraps err, adding proxy.ErrKernelFeature when it says nf_tables
// (or one of its expressions) is missing.
func kernelErr(op string, err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%s: %w: %w", op, proxy.ErrKernelFeature, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// sndbuf and rcvbuf are the socket buffers asked for: a cold sync of
// 10,000 services is ~5 MB of elements, sent in batches of at most a
// quarter of the send buffer (1 MiB); each message of a batch is
// acknowledged, and the acknowledgements must fit the receive buffer
// (8 MiB after the kernel doubles it: 8,192 messages, see ackCost).
const (
	sndbuf    = 8 << 20
	rcvbuf    = 4 << 20
	maxBudget = 1 << 20
)

func (d *Dataplane) dial() error {
	var snd, rcv int
	setBuf := func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		return rc.Control(func(fd uintptr) {
			s := int(fd)
			// The FORCE variants exceed net.core.[wr]mem_max (CAP_NET_ADMIN
			// in the initial user namespace); without it, ask within them.
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sndbuf) != nil {
				_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf)
			}
			want := rcvbuf
			if d.opts.rcvbuf > 0 {
				want = d.opts.rcvbuf
			}
			if unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, want) != nil {
				_ = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, want)
			}
			snd, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF)
			rcv, _ = unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF)
			if sa, err := unix.Getsockname(s); err == nil {
				if nl, ok := sa.(*unix.SockaddrNetlink); ok {
					d.portid.Store(nl.Pid)
				}
			}
			// Read-backs in 32 KiB steps (dumpsize.go); without it they
			// only take longer.
			_ = primeDumpSize(s)
		})
	}
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(setBuf)}
	if d.opts.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(d.opts.NetNS))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return kernelErr("nft: open netlink", err)
	}
	d.conn = c
	d.budget = min(max(snd/4, 32<<10), maxBudget)
	d.rcvbuf = rcv
	// Room for the structural messages beside the elements is left by
	// flushBatch, which sends them apart when they do not fit.
	d.maxMsgs = max(rcv/ackCost, 16)
	if d.opts.maxMsgs > 0 {
		d.maxMsgs = d.opts.maxMsgs
	}
	return nil
}

// redial replaces the connection after a failed batch, so nothing left
// buffered or unread on the old socket leaks into the next one.
func (d *Dataplane) redial() {
	if d.conn != nil {
		d.conn.CloseLasting()
	}
	if err := d.dial(); err != nil {
		d.opts.Log.Warn("nft: reopen netlink", "err", err)
	}
}

func (d *Dataplane) reset() {
	d.svcs = map[proxy.Key]*svcState{}
	d.fronts = map[frontend]proxy.Key{}
	d.nodes = map[netip.Addr]bool{}
	d.chains = map[famChain]int{}
	d.hints, d.hintBE, d.order = nil, nil, nil
	d.synced, d.dirty = false, false
	d.clean.valid = false
	if d.nextID == 0 {
		d.nextID = 1
	}
}

// Name implements proxy.Dataplane.
func (d *Dataplane) Name() string { return "nftables" }

// Stats returns what has been sent to the kernel so far.
func (d *Dataplane) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

var errClosed = errors.New("nft: dataplane closed")

// Apply implements proxy.Dataplane. Refusals are per service: a service
// that is invalid, needs what nftables cannot do (lc, wlc, sed, nq
// schedulers; DR or tunnel methods → proxy.ErrUnsupported) or claims another
// one's frontend is left out — it keeps what it had, a new one is not
// programmed — every other service is written, and the error is a
// *proxy.ServiceErrors naming each refused one. Only Config-wide faults (a
// bad node address) refuse the whole Config. Only the elements of services
// that differ from the last Apply are written, in one netlink batch for a
// small change.
func (d *Dataplane) Apply(ctx context.Context, cfg proxy.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	good := d.good
	cfg, known := d.skipRefused(cfg)
	err := d.apply(ctx, cfg)
	if err == nil || proxy.Partial(err) {
		d.good = d.order
		return withRefused(err, known)
	}
	if !refusedByKernel(ctx, err) || good == nil {
		return err
	}
	return withRefused(d.isolate(ctx, cfg, good, err), known)
}

// apply is Apply without the lock and without isolating kernel refusals.
func (d *Dataplane) apply(ctx context.Context, cfg proxy.Config) error {
	g0, c0, gok := d.genBefore()
	var snap *snapshot
	if !d.synced || d.dirty {
		var err error
		if snap, err = d.read(); err != nil {
			return err
		}
		if !d.synced {
			d.adopt(snap)
		}
	}
	ch, err := d.plan(cfg)
	if err != nil {
		return err
	}
	var refused error
	if len(ch.failed) > 0 {
		refused = &proxy.ServiceErrors{Failed: ch.failed}
	}
	// An incremental write keeps the kernel equal to the model only if it
	// was equal before (at g0); a full sync makes it so from the read-back.
	wasClean := snap != nil || (gok && d.clean.valid && d.clean.gen == g0)
	created, deleted := d.commit(ch)
	if snap != nil {
		err = d.recoverLostAcks(ctx, d.fullSync(ctx, snap))
	} else {
		err = d.incremental(ctx, ch, created, deleted)
	}
	if err != nil {
		d.dirty, d.clean.valid = true, false
		return err
	}
	d.synced, d.dirty, d.hints, d.hintBE = true, false, nil, nil
	if wasClean {
		d.settle(g0, c0, gok)
	} else {
		d.clean.valid = false
	}
	return refused
}

// Resync implements proxy.Dataplane: it reads the table back and repairs
// whatever differs from the model — a deleted table, chain, rule, set or
// element is restored, a changed element rewritten, an element edgelb does
// not want removed. Rules and chains without edgelb's marks stay.
//
// When no nf_tables transaction was committed in the namespace since the
// kernel last equalled the model (the ruleset generation, gen.go), there is
// nothing to repair and Resync costs one netlink round trip instead of a
// read-back of every element; every FullEvery-th call reads back anyway.
func (d *Dataplane) Resync(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	if !d.synced {
		return nil // nothing applied yet
	}
	d.stats.Resyncs++
	every := uint64(d.opts.FullEvery)
	if every == 0 {
		every = DefaultFullEvery
	}
	if !d.dirty && d.stats.Resyncs%every != 0 && d.unchanged() {
		d.stats.Gated++
		return nil
	}
	g0, c0, gok := d.genBefore()
	snap, err := d.read()
	if err != nil {
		return err
	}
	if err := d.recoverLostAcks(ctx, d.fullSync(ctx, snap)); err != nil {
		d.dirty, d.clean.valid = true, false
		return err
	}
	d.dirty = false
	d.settle(g0, c0, gok)
	return nil
}

// Cleanup implements proxy.Dataplane: it deletes both tables (and with them
// every chain, rule, set and element edgelb made). Connections already
// NATed keep their conntrack entries.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	d.reset()
	var errs []error
	for _, t := range d.tables {
		// One batch per table: a missing one (ENOENT) must not keep the
		// other from going.
		d.conn.DelTable(t)
		d.stats.Batches++
		d.stats.Messages++
		if err := d.conn.Flush(); err != nil {
			d.redial()
			if !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("nft: delete table %s %s: %w", famOf(t.Family == nftables.TableFamilyIPv6), t.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Close implements proxy.Dataplane. It leaves the kernel as it is.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.genConn != nil {
		d.genConn.Close()
	}
	if d.mon != nil {
		d.mon.close()
	}
	return d.conn.CloseLasting()
}

// changes is a validated Config relative to the model.
type changes struct {
	upserts []*svcState // new or changed services (ids assigned)
	olds    []*svcState // what each upsert replaces (nil: new)
	removes []*svcState
	nodes   map[netip.Addr]bool // nil: unchanged
	order   []*svcState         // the Config's services in its order
	failed  map[proxy.Key]error // services refused one by one (nil: none)
}

// refuse records a per-service refusal; the first reason for a key wins.
func (ch *changes) refuse(k proxy.Key, err error) {
	if ch.failed == nil {
		ch.failed = map[proxy.Key]error{}
	}
	if _, ok := ch.failed[k]; !ok {
		ch.failed[k] = err
	}
}

// plan validates cfg and computes what changes. It does not touch the model.
func (d *Dataplane) plan(cfg proxy.Config) (*changes, error) {
	ch := &changes{}
	var errs []error
	// Mark the model's services this Config names (no per-Apply map of all
	// keys: a one-service change among 10,000 should cost little more than
	// reading the Config).
	d.gen++
	gen, visited := d.gen, 0
	var fresh map[proxy.Key]int // keys new to the model, for duplicates
	usedHints := map[uint32]bool{}
	order := make([]*svcState, len(cfg.Services))
	for i := range cfg.Services {
		s := &cfg.Services[i]
		var old *svcState
		key := s.Key()
		// The engine hands services over in a stable order: try the one at
		// the same position last time before hashing the key.
		if i < len(d.order) && d.order[i] != nil && d.order[i].key == key {
			old = d.order[i]
		} else {
			old = d.svcs[key]
		}
		if old != nil {
			if old.gen == gen {
				ch.refuse(key, svcError(s, fmt.Errorf("listed twice (service %d)", i)))
				continue
			}
			old.gen = gen
			visited++
			if sameInput(&old.in, s) {
				order[i] = old
				continue
			}
		} else {
			if fresh == nil {
				fresh = map[proxy.Key]int{}
			}
			if j, dup := fresh[key]; dup {
				ch.refuse(key, svcError(s, fmt.Errorf("listed twice (services %d and %d)", j, i)))
				continue
			}
			fresh[key] = i
		}
		st, err := prepare(s)
		if err != nil {
			// Refused alone: a service programmed before keeps its last
			// good state (old stays marked, so it is not removed).
			ch.refuse(key, err)
			order[i] = old
			continue
		}
		st.gen = gen
		order[i] = st
		switch {
		case old != nil:
			if old.id&idClassMask == st.post.idClass() {
				st.id = old.id
			} // else a new id below: the class is in it
			st.keepPositions(old)
		default:
			if id, ok := d.hint(st); ok && !usedHints[id] && id&idClassMask == st.post.idClass() {
				st.id = id
				usedHints[id] = true
				// A restarted daemon keeps the buckets as they are.
				st.keepPositions(d.kernelLayout(id, st.v6))
			}
		}
		ch.upserts = append(ch.upserts, st)
		ch.olds = append(ch.olds, old)
	}
	if visited < len(d.svcs) {
		for _, st := range d.svcs {
			if st.gen != gen {
				ch.removes = append(ch.removes, st)
			}
		}
	}
	d.checkFrontends(ch)
	ch.dropRefused(order)

	nodes := make(map[netip.Addr]bool, len(cfg.NodeAddrs))
	for _, a := range cfg.NodeAddrs {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			errs = append(errs, fmt.Errorf("nft: node address %q: want a plain IPv4 or IPv6 address", a))
			continue
		}
		nodes[a] = true
	}
	if len(nodes) != len(d.nodes) || !mapsEqual(nodes, d.nodes) {
		ch.nodes = nodes
	}
	if len(errs) > 0 {
		// Config-wide: nothing is programmed, so name every refusal.
		if len(ch.failed) > 0 {
			errs = append(errs, &proxy.ServiceErrors{Failed: ch.failed})
		}
		return nil, errors.Join(errs...)
	}
	// Ids last, so a refused Config consumes none.
	for _, st := range ch.upserts {
		if st.id == 0 {
			id, err := d.allocID(ch, st.post.idClass())
			if err != nil {
				return nil, err
			}
			st.id = id
		}
	}
	ch.order = order
	return ch, nil
}

// allocID hands out ids of a class in increasing order of their number
// (one counter for all classes), so a deleted service's id (and any
// affinity entry still carrying it) is not reused soon; after the 2^22nd
// it wraps and takes the next id nobody holds.
func (d *Dataplane) allocID(ch *changes, class uint32) (uint32, error) {
	if d.nextID <= idNumMax {
		id := idTag | class | d.nextID
		d.nextID++
		return id, nil
	}
	used := make(map[uint32]bool, len(d.svcs)+len(ch.upserts))
	for _, st := range d.svcs {
		used[st.id] = true
	}
	for _, st := range ch.upserts {
		used[st.id] = true
	}
	for n := uint32(1); n <= idNumMax; n++ {
		if id := idTag | class | n; !used[id] {
			return id, nil
		}
	}
	return 0, errors.New("nft: no free service id (4M services?)")
}

func mapsEqual(a, b map[netip.Addr]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// checkFrontends refuses two services answering on the same frontend (the
// same VIP:port/proto under keys that differ by node port, or one node port
// twice).
func (d *Dataplane) checkFrontends(ch *changes) {
	if len(ch.upserts) == 0 {
		return
	}
	moving := make(map[proxy.Key]bool, len(ch.upserts)+len(ch.removes))
	for _, st := range ch.upserts {
		moving[st.key] = true
	}
	for _, st := range ch.removes {
		moving[st.key] = true
	}
	claimed := map[frontend]proxy.Key{}
	for _, st := range ch.upserts {
		// A refused service claims none of its frontends, so it cannot
		// take a later, valid one down with it.
		bad := false
		for _, f := range st.frontends() {
			other, ok := claimed[f]
			if !ok {
				other, ok = d.fronts[f]
				ok = ok && other != st.key && !moving[other]
			}
			if ok {
				ch.refuse(st.key, svcError(&st.in, fmt.Errorf("frontend %s is also service %s's", f, other)))
				bad = true
			}
		}
		if bad {
			continue
		}
		for _, f := range st.frontends() {
			claimed[f] = st.key
		}
	}
}

// dropRefused takes the upserts refused after prepare (a frontend conflict)
// out of the plan: the one it would replace stays as it is.
func (ch *changes) dropRefused(order []*svcState) {
	if len(ch.failed) == 0 {
		return
	}
	back := map[*svcState]*svcState{}
	ups, olds := ch.upserts[:0], ch.olds[:0]
	for i, st := range ch.upserts {
		if _, bad := ch.failed[st.key]; bad {
			back[st] = ch.olds[i]
			continue
		}
		ups, olds = append(ups, st), append(olds, ch.olds[i])
	}
	ch.upserts, ch.olds = ups, olds
	if len(back) == 0 {
		return
	}
	for i, st := range order {
		if old, ok := back[st]; ok {
			order[i] = old
		}
	}
}

// commit makes the planned state the model. It returns the pick-* and
// post-* chains that came into use and those no longer used.
func (d *Dataplane) commit(ch *changes) (created, deleted []famChain) {
	before := make(map[famChain]bool, len(d.chains))
	for c := range d.chains {
		before[c] = true
	}
	drop := func(st *svcState) {
		delete(d.svcs, st.key)
		for _, f := range st.frontends() {
			if d.fronts[f] == st.key {
				delete(d.fronts, f)
			}
		}
		for _, c := range st.chains() {
			if d.chains[c]--; d.chains[c] <= 0 {
				delete(d.chains, c)
			}
		}
	}
	for _, st := range ch.removes {
		drop(st)
	}
	for _, old := range ch.olds {
		if old != nil {
			drop(old)
		}
	}
	for _, st := range ch.upserts {
		d.svcs[st.key] = st
		for _, f := range st.frontends() {
			d.fronts[f] = st.key
		}
		for _, c := range st.chains() {
			d.chains[c]++
		}
	}
	if ch.nodes != nil {
		d.nodes = ch.nodes
	}
	d.order = ch.order
	for c := range d.chains {
		if !before[c] {
			created = append(created, c)
		}
	}
	for c := range before {
		if d.chains[c] == 0 {
			deleted = append(deleted, c)
		}
	}
	sortChains(created)
	sortChains(deleted)
	return created, deleted
}

// famChain is a pick-* or post-* chain in one of the two tables.
type famChain struct {
	v6   bool
	name string
}

// chains are the shared chains a service's elements point to.
func (st *svcState) chains() []famChain {
	var cs []famChain
	if st.post.viaMap() {
		cs = append(cs, famChain{st.v6, st.post.chain()})
	}
	if st.pick.n > 0 {
		cs = append(cs, famChain{st.v6, st.pick.chain()})
	}
	return cs
}

func sortChains(cs []famChain) {
	slices.SortFunc(cs, func(a, b famChain) int {
		switch {
		case a.v6 != b.v6 && b.v6:
			return -1
		case a.v6 != b.v6:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
}
