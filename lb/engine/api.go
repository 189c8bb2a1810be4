package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// Every method below runs on the engine goroutine through do; the bodies
// may touch engine state freely. The reads are in view.go.

// poolStatus and serviceStatus describe the engine's current state (inside
// an operation, before its view is published).
func (e *Engine) poolStatus(name string) lb.PoolStatus { return e.current().poolStatus(name) }

func (e *Engine) serviceStatus(name string) lb.ServiceStatus { return e.current().serviceStatus(name) }

// CreatePool adds a pool (origin api). It refuses a name in use and ranges
// overlapping another pool (*lb.ConflictError quoting both ranges).
func (e *Engine) CreatePool(ctx context.Context, p lb.Pool) (out lb.PoolStatus, err error) {
	err = e.write(ctx, func() error {
		if err := e.validatePool(&p); err != nil {
			return err
		}
		if _, ok := e.pools[p.Name]; ok {
			return &lb.ConflictError{Field: "name", Value: p.Name, Reason: fmt.Sprintf("pool %q already exists", p.Name)}
		}
		t := e.begin()
		t.putPool(store.Pool{Pool: p, Origin: store.OriginAPI})
		if err := t.commit(); err != nil {
			return fmt.Errorf("create pool %q: %w", p.Name, err)
		}
		out = e.poolStatus(p.Name)
		return nil
	})
	return out, err
}

// UpdatePool replaces a pool's ranges and settings. It refuses overlaps
// and dropping an address that is assigned. A config-file pool is refused
// (409 naming the file, see configorigin.go).
func (e *Engine) UpdatePool(ctx context.Context, p lb.Pool) (out lb.PoolStatus, err error) {
	err = e.write(ctx, func() error {
		if err := e.validatePool(&p); err != nil {
			return err
		}
		old, ok := e.pools[p.Name]
		if !ok {
			return notFound("pool", p.Name)
		}
		if err := e.refuseConfigOrigin("pool", p.Name, old.Origin); err != nil {
			return err
		}
		t := e.begin()
		t.putPool(store.Pool{Pool: p, Origin: old.Origin})
		if err := t.commit(); err != nil {
			return fmt.Errorf("update pool %q: %w", p.Name, err)
		}
		out = e.poolStatus(p.Name)
		return nil
	})
	return out, err
}

// DeletePool removes a pool; it refuses while any of its addresses is assigned.
func (e *Engine) DeletePool(ctx context.Context, name string) error {
	return e.write(ctx, func() error {
		old, ok := e.pools[name]
		if !ok {
			return notFound("pool", name)
		}
		if err := e.refuseConfigOrigin("pool", name, old.Origin); err != nil {
			return err
		}
		if _, used := e.alloc.Usage(name); used > 0 {
			return &lb.ConflictError{Field: "name", Value: name,
				Reason: fmt.Sprintf("pool %q has %d address(es) assigned to services (%s)", name, used, e.usersOf(name))}
		}
		t := e.begin()
		t.deletePool(name)
		if err := t.commit(); err != nil {
			return fmt.Errorf("delete pool %q: %w", name, err)
		}
		return nil
	})
}

// usersOf names (up to 3 of) the services holding addresses of a pool.
func (e *Engine) usersOf(pool string) string {
	var names []string
	for _, n := range store.Names(e.svcs) {
		for _, ip := range e.alloc.IPs(n) {
			if p, _ := e.alloc.PoolOf(ip); p == pool {
				names = append(names, fmt.Sprintf("%q has %s", n, ip))
				break
			}
		}
		if len(names) == 3 {
			names = append(names, "...")
			break
		}
	}
	return fmt.Sprint(names)
}

// validation prepares what validate checks specs against: the pools and
// the node ports of a (prospective) service set, indexed once so a config
// load of N services stays O(N).
func (e *Engine) validation(pools map[string]store.Pool, svcs map[string]*service) lb.ValidateOptions {
	o := lb.ValidateOptions{NodePortRange: e.opts.NodePortRange, Pools: []lb.Pool{}, NodePorts: map[lb.PortProto]string{},
		VIPs: map[netip.Addr]string{}, FWMarks: map[uint32]string{}, Dataplane: e.opts.Check, Own: e.own}
	for _, n := range store.Names(pools) {
		o.Pools = append(o.Pools, pools[n].Pool)
	}
	for _, n := range store.Names(svcs) {
		// Every VIP, requested or assigned: a backend may not be one of
		// another service's (the writer is the one place that knows them all).
		for _, v := range append(e.alloc.IPs(n), svcs[n].Spec.VIPs...) {
			if _, taken := o.VIPs[v]; !taken {
				o.VIPs[v] = n
			}
		}
		if m := svcs[n].Spec.FWMark; m != 0 {
			if _, taken := o.FWMarks[m]; !taken {
				o.FWMarks[m] = n
			}
		}
		for _, p := range svcs[n].Spec.Ports {
			k := lb.PortProto{Port: p.NodePort, Protocol: p.Protocol}
			if _, taken := o.NodePorts[k]; p.NodePort != 0 && !taken {
				o.NodePorts[k] = n
			}
		}
	}
	return o
}

// validate normalizes and validates spec (see validation).
func (e *Engine) validate(spec *lb.ServiceSpec, o lb.ValidateOptions) error {
	lb.NormalizeService(spec)
	return lb.ValidateService(spec, o)
}

// PutService creates or replaces a standalone service (a new one has
// origin api; a replaced one keeps its origin). A requested VIP that is
// outside the pools or taken is refused (*lb.FieldError, *lb.ConflictError)
// and nothing changes; when auto-allocation finds no free address the
// service is stored and stays pending until one frees up.
func (e *Engine) PutService(ctx context.Context, spec lb.ServiceSpec) (out lb.ServiceStatus, created bool, err error) {
	spec = store.CloneSpec(spec)
	err = e.write(ctx, func() error {
		origin := store.OriginAPI
		old, ok := e.svcs[spec.Name]
		if ok {
			if err := e.refuseConfigOrigin("service", spec.Name, old.Origin); err != nil {
				return err
			}
			origin = old.Origin
		}
		if err := e.validate(&spec, e.validation(e.pools, e.svcs)); err != nil {
			return err
		}
		t := e.begin()
		t.strict = spec.Name
		t.putService(store.Service{Spec: spec, Origin: origin})
		if err := t.commit(); err != nil {
			return fmt.Errorf("put service %q: %w", spec.Name, err)
		}
		created = !ok
		out = e.serviceStatus(spec.Name)
		return nil
	})
	return out, created, err
}

// DeleteService removes a service and frees its VIPs (pending services
// may get them at once).
func (e *Engine) DeleteService(ctx context.Context, name string) error {
	return e.write(ctx, func() error {
		old, ok := e.svcs[name]
		if !ok {
			return notFound("service", name)
		}
		if err := e.refuseConfigOrigin("service", name, old.Origin); err != nil {
			return err
		}
		t := e.begin()
		t.deleteService(name)
		if err := t.commit(); err != nil {
			return fmt.Errorf("delete service %q: %w", name, err)
		}
		return nil
	})
}

// SyncConfig makes the config file's pools and services current (at start
// and on SIGHUP): each is upserted with origin config, config-origin items
// the file no longer lists are deleted, api-origin items are left alone
// (one of the same name is taken over by the file). All of it is checked
// first and written in one store commit, or nothing changes. A requested
// VIP that is taken leaves that service pending instead of failing the reload.
func (e *Engine) SyncConfig(ctx context.Context, pools []lb.Pool, services []lb.ServiceSpec) error {
	pools = append([]lb.Pool(nil), pools...)
	specs := make([]lb.ServiceSpec, len(services))
	for i := range services {
		specs[i] = store.CloneSpec(services[i])
	}
	if e.opts.Fleet {
		return e.seedConfig(ctx, pools, specs)
	}
	return e.do(ctx, func() error {
		t := e.beginFor(len(specs))
		inFile := map[string]bool{}
		for _, p := range pools {
			if err := e.validatePool(&p); err != nil {
				return fmt.Errorf("config: pool %q: %w", p.Name, err)
			}
			if inFile[p.Name] {
				return &lb.FieldError{Field: "pools", Value: p.Name, Err: errors.New("duplicate pool name")}
			}
			inFile[p.Name] = true
			np := store.Pool{Pool: p, Origin: store.OriginConfig}
			if old, ok := t.pools[p.Name]; !ok || !reflect.DeepEqual(old, np) {
				t.putPool(np)
			}
		}
		for n, p := range e.pools {
			if p.Origin == store.OriginConfig && !inFile[n] {
				t.deletePool(n)
			}
		}
		inFile = make(map[string]bool, len(specs))
		for i := range specs {
			if inFile[specs[i].Name] {
				return &lb.FieldError{Field: "services", Value: specs[i].Name, Err: errors.New("duplicate service name")}
			}
			inFile[specs[i].Name] = true
		}
		// The prospective service set: validation looks at it (node ports
		// of services about to go away do not count).
		next := make(map[string]*service, max(len(e.svcs), len(specs)))
		for n, s := range e.svcs {
			if s.Origin != store.OriginConfig || inFile[n] {
				next[n] = s
			}
		}
		for i := range specs {
			next[specs[i].Name] = &service{Service: store.Service{Spec: specs[i], Origin: store.OriginConfig}}
		}
		vo := e.validation(t.pools, next)
		if i, err := firstError(len(specs), func(i int) error { return e.validate(&specs[i], vo) }); err != nil {
			return fmt.Errorf("config: service %q: %w", specs[i].Name, err)
		}
		for i := range specs {
			// The record validation saw, with the spec as validate left it
			// (normalized); nothing else holds it.
			ns := next[specs[i].Name]
			ns.Spec = specs[i]
			if old, ok := e.svcs[specs[i].Name]; !ok || !reflect.DeepEqual(old.Service, ns.Service) {
				t.putServiceRef(ns)
			}
		}
		for n, s := range e.svcs {
			if s.Origin == store.OriginConfig && !inFile[n] {
				t.deleteService(n)
			}
		}
		if err := t.commit(); err != nil {
			return fmt.Errorf("apply config: %w", err)
		}
		return nil
	})
}

// SetBackendHealth marks a backend of a service up or down (health
// checks). A down backend stays in the dataplane with weight 0: existing
// connections finish, new ones go elsewhere. backend's port 0 means every
// port of that address. Nothing is stored: health is re-learned after a restart.
func (e *Engine) SetBackendHealth(ctx context.Context, service string, backend netip.AddrPort, healthy bool) error {
	return e.do(ctx, func() error {
		if _, ok := e.svcs[service]; !ok {
			return notFound("service", service)
		}
		down := e.unhealthy[service]
		if down[backend] == !healthy {
			return nil
		}
		if healthy {
			delete(down, backend)
			if len(down) == 0 {
				delete(e.unhealthy, service)
			}
		} else {
			if down == nil {
				down = map[netip.AddrPort]bool{}
				e.unhealthy[service] = down
			}
			down[backend] = true
		}
		e.invalidate(service, false)
		e.refresh()
		return nil
	})
}

// SetRefused records which services the dataplane refused at its last apply
// (name → reason; empty: none), so their status says "failed" while every
// other service is programmed. It is status only: nothing is stored and no
// new desired state is published (the same state would be refused again);
// the version moves so pollers (the web UI) see the change. The names are
// the proxy.Service names the renderer gives ("web/http",
// "web/http/nodeport"): each is shown on its service ("web", the part
// before the first "/", which a service name cannot contain), reasons
// joined in name order.
func (e *Engine) SetRefused(ctx context.Context, refused map[string]string) error {
	byService := map[string]string{}
	for _, n := range slices.Sorted(maps.Keys(refused)) {
		owner, _, _ := strings.Cut(n, "/")
		if byService[owner] != "" {
			byService[owner] += "; "
		}
		byService[owner] += refused[n]
	}
	return e.do(ctx, func() error {
		if maps.Equal(e.refused, byService) {
			return nil
		}
		e.refused = byService
		e.bumpVersion()
		return nil
	})
}

// validatePool is the standalone writer's check of a pool: on its own
// (lb.ValidateStandalonePool), then its announce: against the gateway's
// announcers when the daemon gave them.
func (e *Engine) validatePool(p *lb.Pool) error {
	if err := lb.ValidateStandalonePool(p, e.own); err != nil {
		return err
	}
	if e.opts.Announcers == nil {
		return nil
	}
	return lb.ValidatePoolAnnounce(p, *e.opts.Announcers)
}
