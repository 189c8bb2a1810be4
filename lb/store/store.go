// Package store persists what standalone edgelb must not forget across a
// restart: pools, standalone services and their VIP assignments. The engine
// (the one writer) is its only user; every logical change is one Commit,
// applied atomically.
package store

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/edgelb/edgelb/lb"
)

// Origin says who declared an item: the config file (replaced on every
// reload) or the REST API (kept across reloads).
type Origin string

const (
	OriginConfig Origin = "config"
	OriginAPI    Origin = "api"
)

// Valid reports whether o is a known origin.
func (o Origin) Valid() bool { return o == OriginConfig || o == OriginAPI }

// Pool is a stored pool.
type Pool struct {
	lb.Pool
	Origin Origin
}

// Service is a stored standalone service.
type Service struct {
	Spec   lb.ServiceSpec
	Origin Origin
}

// State is everything a store holds.
type State struct {
	Pools    map[string]Pool
	Services map[string]Service
	// Assignments: service name → its VIPs.
	Assignments map[string][]netip.Addr
}

// NewState returns an empty state with its maps made.
func NewState() State {
	return State{Pools: map[string]Pool{}, Services: map[string]Service{}, Assignments: map[string][]netip.Addr{}}
}

// Change is one logical change, committed atomically: all of it or none.
// Deletes apply before puts.
type Change struct {
	PutPools          []Pool
	DeletePools       []string
	PutServices       []Service
	DeleteServices    []string
	PutAssignments    map[string][]netip.Addr // an empty list deletes
	DeleteAssignments []string
}

// Empty reports whether the change does nothing.
func (c *Change) Empty() bool {
	return len(c.PutPools)+len(c.DeletePools)+len(c.PutServices)+len(c.DeleteServices)+
		len(c.PutAssignments)+len(c.DeleteAssignments) == 0
}

// Store persists State.
type Store interface {
	// Load returns everything stored. A record that cannot be decoded is an
	// error naming its bucket and key (nothing is silently dropped).
	Load() (State, error)
	// Commit applies c atomically.
	Commit(c Change) error
	Close() error
}

// ErrClosed is returned by a closed store.
var ErrClosed = errors.New("store closed")

// check refuses a change that would store something Load could not read back.
func (c *Change) check() error {
	for _, p := range c.PutPools {
		if err := lb.ValidateName(p.Name); err != nil {
			return fmt.Errorf("pool: %w", err)
		}
		if !p.Origin.Valid() {
			return fmt.Errorf("pool %q: unknown origin %q", p.Name, p.Origin)
		}
	}
	for _, s := range c.PutServices {
		if err := lb.ValidateName(s.Spec.Name); err != nil {
			return fmt.Errorf("service: %w", err)
		}
		if !s.Origin.Valid() {
			return fmt.Errorf("service %q: unknown origin %q", s.Spec.Name, s.Origin)
		}
	}
	for svc, ips := range c.PutAssignments {
		if svc == "" {
			return errors.New("assignment without a service name")
		}
		for _, ip := range ips {
			if !ip.IsValid() {
				return fmt.Errorf("assignment of service %q: invalid address", svc)
			}
		}
	}
	return nil
}

// Clone deep-copies the state (the fake store hands out copies only).
func (s State) Clone() State {
	out := NewState()
	for k, p := range s.Pools {
		out.Pools[k] = clonePool(p)
	}
	for k, v := range s.Services {
		out.Services[k] = Service{Spec: CloneSpec(v.Spec), Origin: v.Origin}
	}
	for k, v := range s.Assignments {
		out.Assignments[k] = slices.Clone(v)
	}
	return out
}

func clonePool(p Pool) Pool {
	p.Ranges = slices.Clone(p.Ranges)
	p.Advertisement.Communities = slices.Clone(p.Advertisement.Communities)
	p.Advertisement.LargeCommunities = slices.Clone(p.Advertisement.LargeCommunities)
	return p
}

// CloneSpec deep-copies a service spec.
func CloneSpec(s lb.ServiceSpec) lb.ServiceSpec {
	s.VIPs = slices.Clone(s.VIPs)
	s.Families = slices.Clone(s.Families)
	s.Ports = slices.Clone(s.Ports)
	s.Backends = slices.Clone(s.Backends)
	if s.Health != nil {
		h := *s.Health
		s.Health = &h
	}
	return s
}

// Names returns the sorted keys of a map (stable iteration for callers).
func Names[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
