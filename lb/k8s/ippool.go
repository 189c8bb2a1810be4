package k8s

import (
	"errors"
	"fmt"
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

// poolFromObject parses an IPPool object with the same rules as standalone
// pools (lb.ParseRange, Pool.Validate). Errors are *lb.FieldError with the
// field path in the object and the bad value.
func poolFromObject(u *unstructured.Unstructured) (lb.Pool, error) {
	p := lb.Pool{Name: u.GetName(), AutoAssign: true}
	addrs, _, err := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
	if err != nil {
		return p, &lb.FieldError{Field: "spec.addresses", Err: err}
	}
	for i, s := range addrs {
		r, err := lb.ParseRange(s)
		if err != nil {
			return p, &lb.FieldError{Field: fmt.Sprintf("spec.addresses[%d]", i), Value: s, Err: err}
		}
		p.Ranges = append(p.Ranges, r)
	}
	if v, ok, _ := unstructured.NestedBool(u.Object, "spec", "autoAssign"); ok {
		p.AutoAssign = v
	}
	p.AvoidBuggyIPs, _, _ = unstructured.NestedBool(u.Object, "spec", "avoidBuggyIPs")
	adv := &p.Advertisement
	adv.Communities, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "advertisement", "communities")
	adv.LargeCommunities, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "advertisement", "largeCommunities")
	if v, ok, _ := unstructured.NestedInt64(u.Object, "spec", "advertisement", "localPref"); ok {
		if v < 0 || v > math.MaxUint32 {
			return p, &lb.FieldError{Field: "spec.advertisement.localPref", Value: fmt.Sprint(v), Err: errors.New("must be 0..4294967295")}
		}
		adv.LocalPref = uint32(v)
	}
	if v, ok, _ := unstructured.NestedInt64(u.Object, "spec", "advertisement", "aggregationLength"); ok {
		adv.AggregationLen = int(v)
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "serviceAllocation"); ok && v != nil {
		m, isMap := v.(map[string]any)
		if !isMap {
			return p, &lb.FieldError{Field: "spec.serviceAllocation", Value: fmt.Sprint(v), Err: errors.New("want an object")}
		}
		var sa lb.ServiceAllocation
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, &sa, true); err != nil {
			return p, &lb.FieldError{Field: "spec.serviceAllocation", Err: err}
		}
		sa.Normalize()
		p.Allocation = &sa
	}
	if err := p.Validate(); err != nil {
		var fe *lb.FieldError
		if errors.As(err, &fe) && fe.Field != "name" {
			fe.Field = "spec." + fe.Field
		}
		return p, err
	}
	return p, nil
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
	if len(adv) > 0 {
		spec["advertisement"] = adv
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

// computePools validates every pool and refuses overlaps: the older pool
// (by creation time, then name) keeps its range, so adding a bad pool never
// changes what existing Services hold.
func computePools(objs []*unstructured.Unstructured) poolSet {
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
		p, err := poolFromObject(u)
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
