// Package ipvs is the IPVS implementation of proxy.Dataplane, over
// github.com/moby/ipvs (generic netlink), rtnetlink and nftables. See
// README.md for the kernel objects it owns and the ownership rule.
package ipvs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// Options configures a Dataplane. The zero value programs the caller's
// network namespace with the defaults below.
type Options struct {
	// NetNS is the path of the network namespace to program (e.g.
	// /run/netns/gw); empty means the caller's.
	NetNS string
	// Device holds the VIPs (default DefaultDevice, "edgelb0").
	Device string
	// DrainTimeout bounds how long a removed TCP backend keeps its
	// connections at weight 0 before it is deleted (default 5 minutes).
	DrainTimeout time.Duration
	// CallTimeout bounds every IPVS netlink call (default 10 s).
	CallTimeout time.Duration
	// MasqMark is the packet-mark bit of connections to masquerade
	// (default DefaultMasqMark).
	MasqMark uint32
	// ResyncSpread: a Resync reads the destinations of 1/ResyncSpread of
	// the services (a rotating window) besides every changed or draining
	// one, so each is read at least once every ResyncSpread resyncs
	// (default DefaultResyncSpread; 1 reads all every time).
	ResyncSpread int
	// FullEvery: every FullEvery-th Resync reads every service and rebuilds
	// the nftables table (default DefaultFullEvery).
	FullEvery int
	// SetSysctls writes hostcheck.IPVSSysctls in the namespace at New and
	// every Resync (proxy/sysctl.Ensure); without, they are left to sysctl.d.
	SetSysctls bool
	// Logf receives one line per notable change (default: discarded).
	Logf func(format string, args ...any)
	// Now is the clock for drain timeouts (default time.Now).
	Now func() time.Time
}

// Default option values.
const (
	DefaultDrainTimeout = 5 * time.Minute
	DefaultCallTimeout  = 10 * time.Second
)

// Dataplane programs IPVS. It is safe for concurrent use; calls are serialised.
type Dataplane struct {
	mu   sync.Mutex
	opts Options
	ns   netns.NsHandle // closed handle = the caller's namespace
	nl   *netlink.Handle
	h    handle
	eng  *engine
}

var _ proxy.Dataplane = (*Dataplane)(nil)

// New probes IPVS, sets the sysctls IPVS needs (Options.SetSysctls) and opens the handles. On a
// kernel without IPVS it fails at once with an error wrapping
// proxy.ErrKernelFeature that names the missing feature; it never returns a
// dataplane that would silently do nothing.
func New(opts Options) (*Dataplane, error) {
	if opts.Device == "" {
		opts.Device = DefaultDevice
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MasqMark == 0 {
		opts.MasqMark = DefaultMasqMark
	}
	if opts.ResyncSpread <= 0 {
		opts.ResyncSpread = DefaultResyncSpread
	}
	if opts.FullEvery <= 0 {
		opts.FullEvery = DefaultFullEvery
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.Device) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("ipvs: device %q: name longer than %d bytes", opts.Device, unix.IFNAMSIZ-1)
	}
	// Before anything touches moby/ipvs: it caches the family id once per
	// process and hides its absence.
	if err := Available(); err != nil {
		return nil, err
	}
	d := &Dataplane{opts: opts, ns: netns.None()}
	fail := func(err error) (*Dataplane, error) {
		d.Close()
		return nil, err
	}
	if opts.NetNS != "" {
		ns, err := netns.GetFromPath(opts.NetNS)
		if err != nil {
			return nil, fmt.Errorf("ipvs: open network namespace %q: %w", opts.NetNS, err)
		}
		d.ns = ns
	}
	var err error
	if d.ns.IsOpen() {
		d.nl, err = netlink.NewHandleAt(d.ns, unix.NETLINK_ROUTE)
	} else {
		d.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fail(fmt.Errorf("ipvs: rtnetlink handle: %w", err))
	}
	if opts.SetSysctls {
		if err := d.ensureSysctls(); err != nil {
			return fail(err)
		}
	}
	mh, err := newMobyHandle(opts.NetNS, opts.CallTimeout)
	if err != nil {
		return fail(err)
	}
	d.h = mh
	// A read proves the family works in this namespace (and not just exists).
	if _, err := mh.Services(); err != nil {
		return fail(fmt.Errorf("ipvs: first read of the IPVS table failed: %w", err))
	}
	d.eng = newEngine(mh, &linkDevice{nl: d.nl, name: opts.Device}, &nftSNAT{netns: fdOf(d.ns), mark: opts.MasqMark},
		opts.Now, opts.DrainTimeout, opts.Logf)
	d.eng.spread, d.eng.fullEvery = opts.ResyncSpread, opts.FullEvery
	return d, nil
}

func (d *Dataplane) Name() string { return "ipvs" }

// Apply converges the kernel to cfg: it reads the IPVS service table, changes
// only what differs from cfg and only what edgelb owns, and reads back the
// destinations of services that changed or are draining. Refusals are per
// service: a bad one keeps its last good state, the others are programmed,
// and the error is a *proxy.ServiceErrors.
func (d *Dataplane) Apply(ctx context.Context, cfg proxy.Config) error {
	want, failed, err := buildEach(cfg)
	if err != nil {
		return fmt.Errorf("ipvs: apply: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.eng == nil {
		return errors.New("ipvs: apply: dataplane is closed")
	}
	if len(failed) == 0 {
		return d.eng.apply(ctx, want, readChanged)
	}
	// Refused one by one (as nftables): each keeps its last good state,
	// every other service is programmed.
	for k, why := range failed {
		failed[k] = fmt.Errorf("ipvs: %w", why)
	}
	for i := range cfg.Services {
		if s := &cfg.Services[i]; failed[s.Key()] != nil {
			want.keep(d.eng.last, serviceName(s))
		}
	}
	if err := d.eng.apply(ctx, want, readChanged); err != nil {
		return err
	}
	return &proxy.ServiceErrors{Failed: failed}
}

// Resync repairs drift from the last applied Config: it reads the service
// table and the VIP device whole, the destinations of a rotating window of
// services (Options.ResyncSpread) and of every draining one, and rebuilds
// the nftables table only if someone else committed to nftables since
// edgelb's last write (every Options.FullEvery-th Resync reads and rebuilds
// everything). It also finishes drains whose connections ended or whose
// timeout passed. The daemon calls it on a timer.
func (d *Dataplane) Resync(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.eng == nil {
		return errors.New("ipvs: resync: dataplane is closed")
	}
	if d.eng.last == nil {
		return nil // nothing applied yet
	}
	// The settings are repaired whatever the tables need, and a failure
	// here does not keep the tables from being repaired.
	err := d.eng.resync(ctx)
	if d.opts.SetSysctls {
		err = errors.Join(err, d.ensureSysctls())
	}
	return err
}

// LastSync reports the kernel changes of the last Apply or Resync.
func (d *Dataplane) LastSync() SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.eng == nil {
		return SyncStats{}
	}
	return d.eng.stats
}

// Cleanup removes every virtual service edgelb owns, the device with its
// VIPs and the nftables table. Sysctls stay.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.eng == nil {
		return errors.New("ipvs: cleanup: dataplane is closed")
	}
	return d.eng.cleanup()
}

// Close releases the handles; the kernel state stays.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h != nil {
		d.h.Close()
		d.h = nil
	}
	if d.nl != nil {
		d.nl.Close()
		d.nl = nil
	}
	if d.ns.IsOpen() {
		d.ns.Close()
	}
	d.ns = netns.None()
	if d.eng != nil {
		d.eng.snat.Close()
	}
	d.eng = nil
	return nil
}
