package nft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// refusedByKernel reports whether an Apply failed because the kernel refused
// the write (an errno in a batch), not because the caller gave up, the
// dataplane closed or nf_tables itself is missing: only then can leaving a
// service out help.
func refusedByKernel(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, errClosed) && !errors.Is(err, proxy.ErrKernelFeature) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// change is one service's step from the last good state to the Config: an
// upsert (svc set) or a removal (only key).
type change struct {
	key proxy.Key
	svc *proxy.Service
}

// isolate finds which services' changes the kernel refuses, after a write of
// cfg failed as a whole (nf_tables batches are atomic: one refused element
// or chain fails every change in it). It starts from the last state the
// kernel took (good) and adds the changes in halves, bisecting a failing
// half down to single services: a change the kernel refuses alone is left
// out — its service keeps its last good state — and every other one is
// programmed. Cost: about 2·log2(changes) extra writes per refused service,
// paid only when the kernel refuses something.
func (d *Dataplane) isolate(ctx context.Context, cfg proxy.Config, good []*svcState, whole error) error {
	base := make(map[proxy.Key]*proxy.Service, len(good))
	var baseOrder []proxy.Key
	for _, st := range good {
		if st != nil {
			in := st.input()
			base[st.key] = &in
			baseOrder = append(baseOrder, st.key)
		}
	}
	var changes []change
	inCfg := make(map[proxy.Key]bool, len(cfg.Services))
	for i := range cfg.Services {
		s := &cfg.Services[i]
		inCfg[s.Key()] = true
		if old, ok := base[s.Key()]; !ok || !sameInput(old, s) {
			changes = append(changes, change{key: s.Key(), svc: s})
		}
	}
	for _, k := range baseOrder {
		if !inCfg[k] {
			changes = append(changes, change{key: k})
		}
	}
	failed := map[proxy.Key]error{}
	applied := map[proxy.Key]change{} // changes the kernel took so far
	render := func(extra []change) proxy.Config {
		out := proxy.Config{NodeAddrs: cfg.NodeAddrs}
		take := make(map[proxy.Key]change, len(applied)+len(extra))
		for k, c := range applied {
			take[k] = c
		}
		for _, c := range extra {
			take[c.key] = c
		}
		seen := map[proxy.Key]bool{}
		// The Config's order first (the model's position hints), then
		// base services whose change is not (yet) taken.
		for i := range cfg.Services {
			s := &cfg.Services[i]
			k := s.Key()
			if seen[k] {
				continue
			}
			if c, ok := take[k]; ok {
				seen[k] = true
				if c.svc != nil {
					out.Services = append(out.Services, *c.svc)
				}
			} else if b, ok := base[k]; ok {
				seen[k] = true
				out.Services = append(out.Services, *b)
			}
		}
		for _, k := range baseOrder {
			if seen[k] {
				continue
			}
			if c, ok := take[k]; ok && c.svc == nil {
				continue // removal taken
			}
			out.Services = append(out.Services, *base[k])
		}
		return out
	}
	try := func(extra []change) error {
		err := d.apply(ctx, render(extra))
		if proxy.Partial(err) {
			return nil // refused before the kernel: reported by the last apply below
		}
		return err
	}
	if err := try(nil); err != nil {
		// Even the last good state is refused now: not one service's doing.
		return errors.Join(whole, fmt.Errorf("nft: the last good state is refused too: %w", err))
	}
	var add func(group []change) error
	add = func(group []change) error {
		if len(group) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		err := try(group)
		if err == nil {
			for _, c := range group {
				applied[c.key] = c
			}
			return nil
		}
		if !refusedByKernel(ctx, err) {
			return err
		}
		if len(group) == 1 {
			c := group[0]
			if c.svc != nil {
				failed[c.key] = svcError(c.svc, fmt.Errorf("refused by the kernel: %w", err))
			} else {
				failed[c.key] = fmt.Errorf("nft: service %s: removal refused by the kernel: %w", c.key, err)
			}
			return nil
		}
		half := len(group) / 2
		if err := add(group[:half]); err != nil {
			return err
		}
		return add(group[half:])
	}
	if err := add(changes); err != nil {
		return err
	}
	// The final state: every change the kernel took (converges the model
	// after the last failed trial), plus refusals made before the kernel.
	err := d.apply(ctx, render(nil))
	for k, why := range proxy.FailedServices(err) {
		failed[k] = why
	}
	if err != nil && !proxy.Partial(err) {
		return err
	}
	d.good = d.order
	if len(failed) == 0 {
		return nil // the whole write went through on a retry
	}
	for k, why := range failed {
		for _, c := range changes {
			if c.key == k && c.svc != nil {
				if d.kernelRefused == nil {
					d.kernelRefused = map[proxy.Key]refusedChange{}
				}
				in := *c.svc
				in.Backends = slices.Clone(in.Backends) // the caller's slice may change
				d.kernelRefused[k] = refusedChange{in: in, err: why, at: time.Now()}
			}
		}
	}
	return &proxy.ServiceErrors{Failed: failed}
}

// refusedChange is a service input the kernel refused, and why.
type refusedChange struct {
	in  proxy.Service
	err error
	at  time.Time
}

// retryRefused is how long a kernel refusal is trusted: an errno may be
// transient (memory), so after this the change is tried again (the daemon
// re-applies a partly refused state on its resync timer).
const retryRefused = 30 * time.Second

// skipRefused replaces, in cfg, each service whose input the kernel refused
// last time (unchanged since) with its last good state, so a repeated Apply
// does not retry — and churn — what the kernel refuses; the refusal is
// reported again. A service whose input changed, or refused longer than
// retryRefused ago, is tried afresh.
func (d *Dataplane) skipRefused(cfg proxy.Config) (proxy.Config, map[proxy.Key]error) {
	if len(d.kernelRefused) == 0 {
		return cfg, nil
	}
	good := make(map[proxy.Key]*proxy.Service, len(d.kernelRefused))
	for _, st := range d.good {
		if st != nil {
			if _, ok := d.kernelRefused[st.key]; ok {
				in := st.input()
				good[st.key] = &in
			}
		}
	}
	var known map[proxy.Key]error
	out := cfg
	copied := false
	still := map[proxy.Key]bool{}
	for i := range cfg.Services {
		k := cfg.Services[i].Key()
		r, ok := d.kernelRefused[k]
		if !ok || !sameInput(&r.in, &cfg.Services[i]) || time.Since(r.at) > retryRefused {
			continue
		}
		still[k] = true
		if !copied {
			out.Services = slices.Clone(cfg.Services)
			copied = true
		}
		if g := good[k]; g != nil {
			out.Services[i] = *g
		}
		if known == nil {
			known = map[proxy.Key]error{}
		}
		known[k] = r.err
	}
	for k := range d.kernelRefused {
		if !still[k] {
			delete(d.kernelRefused, k)
		}
	}
	return out, known
}

// withRefused adds known kernel refusals to an Apply's result.
func withRefused(err error, known map[proxy.Key]error) error {
	if len(known) == 0 {
		return err
	}
	if err != nil && !proxy.Partial(err) {
		return err
	}
	failed := maps.Clone(proxy.FailedServices(err))
	if failed == nil {
		failed = map[proxy.Key]error{}
	}
	for k, why := range known {
		failed[k] = why
	}
	return &proxy.ServiceErrors{Failed: failed}
}
