package webui

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
)

// PoolSpec is the JSON body of POST /api/v1/pools and PUT /api/v1/pools/{name}.
// Addresses are strings ("192.0.2.0/24", "192.0.2.10-192.0.2.20",
// "2001:db8::/120") parsed once here into lb.Range.
type PoolSpec struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	// AutoAssign defaults to true (as in YAML, IPPool objects and MetalLB):
	// absent means true, so a pointer.
	AutoAssign    *bool              `json:"autoAssign,omitempty"`
	AvoidBuggyIPs bool               `json:"avoidBuggyIPs"`
	Advertisement *AdvertisementSpec `json:"advertisement,omitempty"`
	// ServiceAllocation is lb's own type (plain values, nothing to parse);
	// lb.Pool.Validate checks it, and a standalone gateway's writer refuses
	// its selectors (lb.ValidateStandalonePool).
	ServiceAllocation *lb.ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// AdvertisementSpec carries the BGP attributes of a pool's routes.
type AdvertisementSpec struct {
	Communities       []string `json:"communities,omitempty"`
	LargeCommunities  []string `json:"largeCommunities,omitempty"`
	LocalPref         int64    `json:"localPref,omitempty"`
	AggregationLength int      `json:"aggregationLength,omitempty"`
}

// PoolStatus is a pool as the API returns it: its spec and its usage.
type PoolStatus struct {
	Spec PoolSpec `json:"spec"`
	// Size is the number of addresses (capped at 2^64-1 for huge IPv6 pools).
	Size uint64 `json:"size"`
	// Used is how many of them are assigned to services.
	Used int `json:"used"`
	// Origin is who declared it: "config" (the config file: REST writes
	// are refused), "api" or "kubernetes" (an IPPool object).
	Origin string `json:"origin"`
}

// wellKnownCommunities are the names RFC 1997/7999/8326 give; gobgp accepts them.
var wellKnownCommunities = map[string]bool{
	"no-export": true, "no-advertise": true, "no-export-subconfed": true, "no-peer": true,
	"blackhole": true, "graceful-shutdown": true, "accept-own": true, "llgr-stale": true, "no-llgr": true,
}

// parsePool turns the DTO into an lb.Pool, naming the field of the first
// error. It checks the pool on its own (lb.Pool.Validate); overlaps with
// other pools and addresses in use are the Manager's to refuse (409).
func parsePool(s PoolSpec) (lb.Pool, error) {
	p := lb.Pool{Name: s.Name, AutoAssign: s.AutoAssign == nil || *s.AutoAssign, AvoidBuggyIPs: s.AvoidBuggyIPs,
		Allocation: s.ServiceAllocation}
	if err := lb.ValidateName(s.Name); err != nil {
		return lb.Pool{}, &lb.FieldError{Field: "name", Value: s.Name, Err: err}
	}
	for i, a := range s.Addresses {
		r, err := lb.ParseRange(a)
		if err != nil {
			return lb.Pool{}, &lb.FieldError{Field: fmt.Sprintf("addresses[%d]", i), Value: a, Err: err}
		}
		p.Ranges = append(p.Ranges, r)
	}
	if a := s.Advertisement; a != nil {
		for i, c := range a.Communities {
			if err := checkCommunity(c); err != nil {
				return lb.Pool{}, &lb.FieldError{Field: fmt.Sprintf("advertisement.communities[%d]", i), Value: c, Err: err}
			}
		}
		for i, c := range a.LargeCommunities {
			if err := checkLargeCommunity(c); err != nil {
				return lb.Pool{}, &lb.FieldError{Field: fmt.Sprintf("advertisement.largeCommunities[%d]", i), Value: c, Err: err}
			}
		}
		if a.LocalPref < 0 || a.LocalPref > math.MaxUint32 {
			return lb.Pool{}, &lb.FieldError{Field: "advertisement.localPref", Value: strconv.FormatInt(a.LocalPref, 10),
				Err: errors.New("must be 0..4294967295")}
		}
		p.Advertisement = lb.Advertisement{Communities: a.Communities, LargeCommunities: a.LargeCommunities,
			LocalPref: uint32(a.LocalPref), AggregationLen: a.AggregationLength}
	}
	if err := p.Validate(); err != nil {
		return lb.Pool{}, err
	}
	return p, nil
}

// checkCommunity accepts "ASN:VALUE" (16 bits each) or a well-known name.
func checkCommunity(c string) error {
	if wellKnownCommunities[strings.ToLower(c)] {
		return nil
	}
	a, b, ok := strings.Cut(c, ":")
	if !ok {
		return errors.New("want ASN:VALUE (each 0..65535) or a well-known name such as no-export")
	}
	for _, x := range []string{a, b} {
		if _, err := strconv.ParseUint(x, 10, 16); err != nil {
			return errors.New("want ASN:VALUE with each part 0..65535")
		}
	}
	return nil
}

// checkLargeCommunity accepts "GLOBAL:LOCAL1:LOCAL2" (32 bits each, RFC 8092).
func checkLargeCommunity(c string) error {
	parts := strings.Split(c, ":")
	if len(parts) != 3 {
		return errors.New("want GLOBAL:LOCAL1:LOCAL2 (each 0..4294967295)")
	}
	for _, x := range parts {
		if _, err := strconv.ParseUint(x, 10, 32); err != nil {
			return errors.New("want GLOBAL:LOCAL1:LOCAL2 with each part 0..4294967295")
		}
	}
	return nil
}

// poolSpecOf renders an lb.Pool back into the DTO.
func poolSpecOf(p lb.Pool) PoolSpec {
	s := PoolSpec{Name: p.Name, Addresses: p.RangeStrings(), AutoAssign: &p.AutoAssign, AvoidBuggyIPs: p.AvoidBuggyIPs,
		ServiceAllocation: p.Allocation}
	a := p.Advertisement
	if len(a.Communities) > 0 || len(a.LargeCommunities) > 0 || a.LocalPref != 0 || a.AggregationLen != 0 {
		s.Advertisement = &AdvertisementSpec{Communities: a.Communities, LargeCommunities: a.LargeCommunities,
			LocalPref: int64(a.LocalPref), AggregationLength: a.AggregationLen}
	}
	return s
}

func poolStatusOf(p lb.PoolStatus) PoolStatus {
	return PoolStatus{Spec: poolSpecOf(p.Pool), Size: p.Size, Used: p.Used, Origin: string(p.Origin)}
}
