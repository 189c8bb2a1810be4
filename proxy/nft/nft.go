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
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/nftgen"
	"github.com/edgelb/edgelb/proxy/sysctl"
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

	// SetSysctls writes hostcheck.NFTablesSysctls (ip_forward, IPv6
	// forwarding, nf_conntrack_tcp_be_liberal) in the namespace at New and
	// every Resync (proxy/sysctl.Ensure); without, they are left to sysctl.d.
	SetSysctls bool

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
	// PartialReads: resyncs that read back only the sets whose elements
	// others changed, and nothing else of edgelb's tables (the monitor).
	PartialReads uint64
	Resyncs      uint64 // Resync calls
	Gated        uint64 // of them, answered by the generation gate (nothing committed since the kernel equalled the model)
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
	genConn  *netlink.Conn
	commits  uint64
	clean    nftgen.Gate
	mon      *monitor
	monTried bool          // the monitor was started (or failed to start) after the first sync
	portid   atomic.Uint32 // conn's netlink port id: its own notifications are not foreign
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
	if _, err := d.conn.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
		d.Close()
		return nil, kernelErr("nft: list tables", err)
	}
	if err := d.ensureSysctls(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// ensureSysctls writes the settings the dataplane needs when told to; a
// resync repairs them as it repairs the tables.
func (d *Dataplane) ensureSysctls() error {
	if !d.opts.SetSysctls {
		return nil
	}
	if err := sysctl.Ensure(d.opts.NetNS, hostcheck.NFTablesSysctls); err != nil {
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

// kernelErr wraps err, adding proxy.ErrKernelFeature when it says nf_tables
// (or one of its expressions) is missing.
func kernelErr(op string, err error) error {
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%s: %w: %w", op, proxy.ErrKernelFeature, err)
	}
	return fmt.Errorf("%s: %w", op, err)
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
	wasClean := snap != nil || (gok && d.clean.CleanAt(g0))
	created, deleted := d.commit(ch)
	if snap != nil {
		err = d.recoverLostAcks(ctx, d.fullSync(ctx, snap))
	} else {
		err = d.incremental(ctx, ch, created, deleted)
	}
	if err != nil {
		d.dirty = true
		d.clean.Forget()
		return err
	}
	d.synced, d.dirty, d.hints, d.hintBE = true, false, nil, nil
	d.settle(wasClean, g0, c0, gok)
	d.startMonitor()
	return refused
}

// startMonitor starts the change monitor once, after the first sync. Had it
// listened during that sync, the kernel would have built a notification for
// each of the elements written (121,000 at 10,000 services × 10 backends)
// and the monitor read them all back (50 MB allocated at start-up, most of
// them dropped as ENOBUFS anyway): for nothing, as the monitor vouches only
// for commits after the kernel equalled the model, which a sync ends with.
func (d *Dataplane) startMonitor() {
	if d.monTried {
		return
	}
	d.monTried = true
	m, err := newMonitor(d.opts.NetNS, d.opts.Table, d.portid.Load)
	if err != nil {
		// Without it the generation gate still works; foreign commits to
		// other tables then cost a full read.
		d.opts.Log.Warn("nft: no change monitor; resyncs read back after any nf_tables commit", "err", err)
		return
	}
	d.mon = m
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
	// The settings are repaired whatever the tables need, and a failure
	// here does not keep the tables from being repaired.
	return errors.Join(d.resync(ctx), d.ensureSysctls())
}

func (d *Dataplane) resync(ctx context.Context) error {
	if !d.synced {
		return nil // nothing applied yet
	}
	d.stats.Resyncs++
	every := uint64(d.opts.FullEvery)
	if every == 0 {
		every = DefaultFullEvery
	}
	if !d.dirty && d.stats.Resyncs%every != 0 {
		if d.unchanged() {
			d.stats.Gated++
			return nil
		}
		// Others added or deleted elements of ours and did nothing else:
		// read back and repair those sets only (a full read-back of 50,000
		// services walks half a million elements, quadratically).
		if sets, ok := d.elementsOnly(); ok {
			g0, c0, gok := d.genBefore()
			if err := d.recoverLostAcks(ctx, d.partialSync(ctx, sets)); err != nil {
				d.dirty = true
				d.clean.Forget()
				return err
			}
			d.settle(true, g0, c0, gok)
			return nil
		}
	}
	g0, c0, gok := d.genBefore()
	snap, err := d.read()
	if err != nil {
		return err
	}
	if err := d.recoverLostAcks(ctx, d.fullSync(ctx, snap)); err != nil {
		d.dirty = true
		d.clean.Forget()
		return err
	}
	d.dirty = false
	d.settle(true, g0, c0, gok)
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
