package k8s

import (
	"encoding/json"
	"errors"
	"math"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/edgelb/edgelb/lb"
)

// IPPoolGVR is the IPPool custom resource (cluster-scoped).
var IPPoolGVR = schema.GroupVersionResource{Group: "edgelb.io", Version: "v1alpha1", Resource: "ippools"}

// IPPoolGVK is its kind.
var IPPoolGVK = schema.GroupVersionKind{Group: "edgelb.io", Version: "v1alpha1", Kind: "IPPool"}

// poolFromObject parses an IPPool object: its spec is lb's input schema
// (lb.PoolInput without name), decoded by the strict decoder REST bodies
// and the config file use and judged by the one validator (lb.ParsePool).
// Errors are *lb.FieldError (or *lb.Errors of them) with the field path
// in the object (spec.addresses[0]) and the bad value.
func poolFromObject(u *unstructured.Unstructured, own *lb.OwnAddrs) (lb.Pool, error) {
	var in lb.PoolInput
	if spec, ok := u.Object["spec"]; ok && spec != nil {
		js, err := json.Marshal(spec)
		if err != nil {
			return lb.Pool{Name: u.GetName()}, &lb.FieldError{Field: "spec", Err: err}
		}
		if err := lb.DecodeStrict(js, &in); err != nil {
			return lb.Pool{Name: u.GetName()}, inSpec(err)
		}
		if in.Name != "" {
			return lb.Pool{Name: u.GetName()}, &lb.FieldError{Field: "spec.name", Value: in.Name,
				Err: errors.New("unknown field (the pool's name is metadata.name)")}
		}
	}
	in.Name = u.GetName()
	p, err := lb.ParsePool(&in, own)
	if err != nil {
		return p, inSpec(err)
	}
	return p, nil
}

// inSpec puts the paths of a spec's errors under "spec." (the name is
// metadata's and keeps its own).
func inSpec(err error) error {
	var list *lb.Errors
	var fe *lb.FieldError
	switch {
	case errors.As(err, &list):
		for _, e := range list.List {
			if e.Field != "name" {
				e.Field = "spec." + e.Field
			}
		}
	case errors.As(err, &fe):
		if fe.Field != "name" {
			fe.Field = "spec." + fe.Field
		}
	}
	return err
}

// poolToObject renders a pool as an IPPool object (spec only).
func poolToObject(p lb.Pool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(IPPoolGVK)
	u.SetName(p.Name)
	setPoolSpec(u, p)
	return u
}

func setPoolSpec(u *unstructured.Unstructured, p lb.Pool) {
	addrs := make([]any, len(p.Ranges))
	for i, r := range p.Ranges {
		addrs[i] = r.String()
	}
	spec := map[string]any{
		"addresses":     addrs,
		"autoAssign":    p.AutoAssign,
		"avoidBuggyIPs": p.AvoidBuggyIPs,
	}
	adv := map[string]any{}
	if len(p.Advertisement.Communities) > 0 {
		adv["communities"] = toAny(p.Advertisement.Communities)
	}
	if len(p.Advertisement.LargeCommunities) > 0 {
		adv["largeCommunities"] = toAny(p.Advertisement.LargeCommunities)
	}
	if p.Advertisement.LocalPref != 0 {
		adv["localPref"] = int64(p.Advertisement.LocalPref)
	}
	if p.Advertisement.AggregationLen != 0 {
		adv["aggregationLength"] = int64(p.Advertisement.AggregationLen)
	}
	if p.Advertisement.AggregationLenV6 != 0 {
		adv["aggregationLengthV6"] = int64(p.Advertisement.AggregationLenV6)
	}
	if len(adv) > 0 {
		spec["advertisement"] = adv
	}
	an := map[string]any{}
	for k, l := range map[string][]string{"announcers": p.Announce.Announcers, "peers": p.Announce.Peers, "interfaces": p.Announce.Interfaces} {
		if len(l) > 0 {
			an[k] = toAny(l)
		}
	}
	if len(an) > 0 {
		spec["announce"] = an
	}
	if p.Allocation != nil {
		if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p.Allocation); err == nil {
			spec["serviceAllocation"] = m
		}
	}
	u.Object["spec"] = spec
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// poolSet is the outcome of validating every IPPool object together.
type poolSet struct {
	Valid    []lb.Pool
	Rejected map[string]error // pool name → why it is not used
	// Deleting are IPPools deleted (deletionTimestamp set) that the
	// controller's finalizer keeps while Services still hold their
	// addresses: not used for allocation, their addresses reserved until
	// their Services move (FinalizerInUse).
	Deleting map[string]lb.Pool
}

// Served is what gateways program and announce: the valid pools, then
// the deleting ones. A deleting IPPool still exists (our finalizer holds
// it) and its addresses still belong to their Services until each has
// moved make-before-break, so they keep being served meanwhile; valid pools
// come first, so an address another pool now covers takes that pool's
// announce attributes.
func (ps poolSet) Served() []lb.Pool {
	out := append([]lb.Pool(nil), ps.Valid...)
	names := make([]string, 0, len(ps.Deleting))
	for n := range ps.Deleting {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, ps.Deleting[n])
	}
	return out
}

// FinalizerInUse is set on an IPPool while any Service holds one of its
// addresses, so a `kubectl delete ippool` in use leaves the object — its
// status says who still holds what — until they have moved.
const FinalizerInUse = "edgelb.io/addresses-in-use"

// computePools validates every pool with parse (Controller.parsePool:
// the own-address check at first sight) and refuses overlaps: the older pool
// (by creation time, then name) keeps its range, so adding a bad pool never
// changes what existing Services hold.
func computePools(objs []*unstructured.Unstructured, parse func(*unstructured.Unstructured) (lb.Pool, error)) poolSet {
	sorted := append([]*unstructured.Unstructured(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool {
		ti, tj := sorted[i].GetCreationTimestamp(), sorted[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return sorted[i].GetName() < sorted[j].GetName()
	})
	ps := poolSet{Rejected: map[string]error{}, Deleting: map[string]lb.Pool{}}
	for _, u := range sorted {
		p, err := parse(u)
		if u.GetDeletionTimestamp() != nil {
			if err == nil {
				ps.Deleting[u.GetName()] = p
			}
			continue
		}
		if err == nil {
			err = lb.CheckOverlap(&p, ps.Valid)
		}
		if err != nil {
			ps.Rejected[u.GetName()] = err
			continue
		}
		ps.Valid = append(ps.Valid, p)
	}
	return ps
}

// poolSize is the number of addresses the pool may hand out (avoidBuggyIPs
// excluded, as the allocator counts them) capped at MaxInt64 (the CRD's
// integer).
func poolSize(p *lb.Pool) int64 {
	s := p.UsableSize()
	if !s.IsInt64() {
		return math.MaxInt64
	}
	return s.Int64()
}
