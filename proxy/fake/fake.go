// Package fake is a proxy.Dataplane without a kernel, for logic tests of
// whatever drives a dataplane (the engine, the daemon). Its "kernel" is a set
// of objects — one per service, backend and node address — that Apply
// converges by diffing, like the real dataplanes; Transcript renders them as
// sorted text, so a test compares the whole state with one string, and Ops
// lists what each Apply changed.
package fake

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// Options choose what the fake accepts: a service using a scheduler or
// method outside these lists, or one Check refuses, is refused with
// proxy.ErrUnsupported, as the nftables dataplane refuses lc or DR. Empty
// lists and a nil Check accept everything.
type Options struct {
	Name       string // what Name returns (default "fake")
	Schedulers []proxy.Scheduler
	Methods    []proxy.Method
	// Check is a real dataplane's own verdict (nft.Check), so the fake
	// refuses exactly what that dataplane refuses: one capability
	// description, owned by the dataplane.
	Check func(proxy.Service) error
}

// NFTablesOptions make the fake refuse what the nftables dataplane refuses,
// with nftables' own check (nft.Check), not a copy of its lists.
var NFTablesOptions = Options{
	Name:  "fake-nftables",
	Check: nft.Check,
}

// Dataplane is the fake. It is safe for concurrent use.
type Dataplane struct {
	mu      sync.Mutex
	opts    Options
	kernel  map[string]string // object → attributes
	want    map[string]string // the last applied Config, rendered (nil: none)
	ops     []string
	writes  int
	applies int
	failErr error
	closed  bool
}

var _ proxy.Dataplane = (*Dataplane)(nil)

// ErrClosed is returned after Close.
var ErrClosed = errors.New("fake dataplane closed")

// New returns an empty fake.
func New(opts Options) *Dataplane {
	if opts.Name == "" {
		opts.Name = "fake"
	}
	return &Dataplane{opts: opts, kernel: map[string]string{}}
}

// Name implements proxy.Dataplane.
func (d *Dataplane) Name() string { return d.opts.Name }

// Apply implements proxy.Dataplane: validate, then converge the objects,
// changing only those that differ. As nftables does, refusals are per
// service: a refused service keeps what it had (a new one is not written),
// every other one is converged, and the error is a *proxy.ServiceErrors.
// Only a bad node address refuses the whole Config.
func (d *Dataplane) Apply(ctx context.Context, cfg proxy.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	want, failed, err := d.render(cfg)
	if err != nil {
		return err
	}
	for k := range failed {
		// Last good state: the objects of this key from the last Apply.
		svc := "service " + k.String()
		for id, v := range d.want {
			if id == svc || strings.HasPrefix(id, "backend "+k.String()+" ") {
				want[id] = v
			}
		}
	}
	d.applies++
	d.want = want
	if err := d.converge(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &proxy.ServiceErrors{Failed: failed}
	}
	return nil
}

// Resync implements proxy.Dataplane: converge back to the last applied
// Config (repairs Tamper).
func (d *Dataplane) Resync(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if d.want == nil {
		return nil
	}
	return d.converge()
}

// Cleanup implements proxy.Dataplane: everything goes.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.want = nil
	for _, id := range sortedKeys(d.kernel) {
		d.write("del " + id)
		delete(d.kernel, id)
	}
	return nil
}

// Close implements proxy.Dataplane.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

// converge writes the differences between want and the kernel: deletes
// first, then adds and changes, each in sorted order. With FailNext armed
// it stops halfway, as a kernel refusing a batch would leave it.
func (d *Dataplane) converge() error {
	var ops []func()
	for _, id := range sortedKeys(d.kernel) {
		if _, ok := d.want[id]; !ok {
			ops = append(ops, func() { d.write("del " + id); delete(d.kernel, id) })
		}
	}
	for _, id := range sortedKeys(d.want) {
		v, ok := d.kernel[id]
		switch {
		case !ok:
			ops = append(ops, func() { d.write("add " + line(id, d.want[id])); d.kernel[id] = d.want[id] })
		case v != d.want[id]:
			ops = append(ops, func() { d.write("set " + line(id, d.want[id])); d.kernel[id] = d.want[id] })
		}
	}
	if d.failErr != nil {
		err := d.failErr
		d.failErr = nil
		for _, op := range ops[:len(ops)/2] {
			op()
		}
		return fmt.Errorf("fake: after %d of %d writes: %w", len(ops)/2, len(ops), err)
	}
	for _, op := range ops {
		op()
	}
	return nil
}

func (d *Dataplane) write(op string) {
	d.ops = append(d.ops, op)
	d.writes++
}

func line(id, attrs string) string {
	if attrs == "" {
		return id
	}
	return id + " " + attrs
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Transcript renders the fake kernel as sorted lines, e.g.
//
//	backend 203.0.113.10:80/TCP 198.51.100.2:8080 weight=1
//	nodeaddr 192.0.2.1
//	service 203.0.113.10:80/TCP name="web/http" sched=wrr method=nat affinity=0s
func (d *Dataplane) Transcript() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return transcript(d.kernel)
}

func transcript(m map[string]string) string {
	var b strings.Builder
	for _, id := range sortedKeys(m) {
		b.WriteString(line(id, m[id]))
		b.WriteByte('\n')
	}
	return b.String()
}

// Render is the transcript a Config converges to (Transcript after a
// successful Apply of cfg), for expectations in tests.
func Render(cfg proxy.Config) (string, error) {
	m, failed, err := New(Options{}).render(cfg)
	if err == nil && len(failed) > 0 {
		err = &proxy.ServiceErrors{Failed: failed}
	}
	if err != nil {
		return "", err
	}
	return transcript(m), nil
}

// Ops returns the writes since the last call ("add ...", "set ...",
// "del ..."), in the order made.
func (d *Dataplane) Ops() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ops := d.ops
	d.ops = nil
	return ops
}

// Writes counts every object written since New.
func (d *Dataplane) Writes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes
}

// Applies counts the Apply calls that passed validation.
func (d *Dataplane) Applies() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applies
}

// FailNext makes the next Apply or Resync stop after half of its writes and
// return err (wrapped): the state a failing kernel batch leaves behind.
func (d *Dataplane) FailNext(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failErr = err
}

// Tamper lets a test change the fake kernel behind the dataplane's back
// (delete or edit objects, as an operator with nft or ipvsadm might);
// Resync must repair it. Keys and values are as in Transcript.
func (d *Dataplane) Tamper(fn func(objects map[string]string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.kernel)
}

// render validates cfg and turns it into objects. Services refused one by
// one are in failed (their objects left out, a key listed twice refused
// whole, as nftables does); err is a Config-wide refusal.
func (d *Dataplane) render(cfg proxy.Config) (m map[string]string, failed map[proxy.Key]error, err error) {
	m = map[string]string{}
	var errs []error
	refuse := func(k proxy.Key, err error) {
		if failed == nil {
			failed = map[proxy.Key]error{}
		}
		if _, ok := failed[k]; !ok {
			failed[k] = err
		}
	}
	seen := map[proxy.Key]bool{}
	for i := range cfg.Services {
		if k := cfg.Services[i].Key(); seen[k] {
			refuse(k, fmt.Errorf("fake: service %s: listed twice", k))
		} else {
			seen[k] = true
		}
	}
	fronts := map[string]proxy.Key{}
	for i := range cfg.Services {
		s := &cfg.Services[i]
		key := s.Key()
		id := "service " + key.String()
		if _, bad := failed[key]; bad {
			continue
		}
		if err := d.check(s); err != nil {
			refuse(key, fmt.Errorf("fake: service %s: %w", key, err))
			continue
		}
		clash := false
		for _, f := range frontendsOf(s) {
			if other, ok := fronts[f]; ok {
				refuse(key, fmt.Errorf("fake: service %s: frontend %s is also service %s's", key, f, other))
				clash = true
			}
		}
		if clash {
			continue // a refused service claims none of its frontends
		}
		for _, f := range frontendsOf(s) {
			fronts[f] = key
		}
		sched, method := s.Scheduler, s.Method
		if sched == "" {
			sched = proxy.DefaultScheduler
		}
		if method == "" {
			method = proxy.NAT
		}
		m[id] = fmt.Sprintf("name=%q sched=%s method=%s affinity=%s", s.Name, sched, method, s.Affinity)
		for _, b := range s.Backends {
			attrs := fmt.Sprintf("weight=%d", b.Weight)
			if b.Draining {
				attrs += " draining"
			}
			m["backend "+key.String()+" "+b.Addr.String()] = attrs
		}
	}
	for _, a := range cfg.NodeAddrs {
		if !a.IsValid() {
			errs = append(errs, fmt.Errorf("fake: node address %q: invalid", a))
			continue
		}
		m["nodeaddr "+a.String()] = ""
	}
	if len(errs) > 0 {
		if len(failed) > 0 {
			errs = append(errs, &proxy.ServiceErrors{Failed: failed})
		}
		return nil, nil, errors.Join(errs...)
	}
	return m, failed, nil
}

func frontendsOf(s *proxy.Service) []string {
	if s.FWMark != 0 {
		return []string{s.Key().String()}
	}
	var fs []string
	if s.VIP.IsValid() {
		fs = append(fs, netip.AddrPortFrom(s.VIP, s.Port).String()+"/"+s.Protocol.String())
	}
	if s.NodePort != 0 {
		// One per family: a dual-stack node port is two services.
		fs = append(fs, fmt.Sprintf("nodeport %d/%s %s", s.NodePort, s.Protocol, s.AddrFamily()))
	}
	return fs
}

// check is the validation every dataplane shares, plus Options' limits.
func (d *Dataplane) check(s *proxy.Service) error {
	switch {
	case s.FWMark != 0:
		// A firewall-mark service (IPVS's): the mark is its frontend.
		if s.VIP.IsValid() || s.Port != 0 || s.Protocol != 0 || s.NodePort != 0 {
			return fmt.Errorf("fwmark %d: a firewall-mark service has no VIP, port, protocol or node port", s.FWMark)
		}
	case s.Protocol != proxy.TCP && s.Protocol != proxy.UDP:
		return fmt.Errorf("protocol %q: want TCP or UDP", s.Protocol)
	case !s.VIP.IsValid() && s.NodePort == 0:
		return errors.New("neither a VIP nor a node port")
	}
	if s.VIP.IsValid() && s.Port == 0 {
		return errors.New("port 0: a VIP needs a port")
	}
	sched := s.Scheduler
	if sched == "" {
		sched = proxy.DefaultScheduler
	}
	if _, err := proxy.ParseScheduler(string(sched)); err != nil {
		return err
	}
	if len(d.opts.Schedulers) > 0 && !slices.Contains(d.opts.Schedulers, sched) {
		return fmt.Errorf("scheduler %q: %w", sched, proxy.ErrUnsupported)
	}
	method, err := proxy.ParseMethod(string(s.Method))
	if err != nil {
		return err
	}
	if len(d.opts.Methods) > 0 && !slices.Contains(d.opts.Methods, method) {
		return fmt.Errorf("method %q: %w", method, proxy.ErrUnsupported)
	}
	if d.opts.Check != nil {
		if err := d.opts.Check(*s); err != nil {
			return err
		}
	}
	if s.Affinity < 0 {
		return fmt.Errorf("affinity %q: negative", s.Affinity)
	}
	seen := map[netip.AddrPort]bool{}
	fam := s.AddrFamily()
	for _, b := range s.Backends {
		// Port 0 only on a firewall-mark service: the packet's own port.
		if !b.Addr.Addr().IsValid() || b.Addr.Port() == 0 && s.FWMark == 0 {
			return fmt.Errorf("backend %q: want an address with a port", b.Addr)
		}
		// Every real dataplane refuses this: NAT does not cross families.
		if proxy.FamilyOf(b.Addr.Addr().Unmap()) != fam {
			return fmt.Errorf("backend %q: address family differs from the service's (%s)", b.Addr, fam)
		}
		if seen[b.Addr] {
			return fmt.Errorf("backend %q: listed twice", b.Addr)
		}
		seen[b.Addr] = true
	}
	return nil
}
