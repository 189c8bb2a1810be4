package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/edgelb/edgelb/lb"
)

// Records are JSON with a version field "v", so a later edgelb can read
// older records (and an older edgelb refuses newer ones instead of
// misreading them). Version 1 is the only one so far.
const recordVersion = 1

type header struct {
	V int `json:"v"`
}

type poolRecord struct {
	V             int              `json:"v"`
	Origin        Origin           `json:"origin"`
	Name          string           `json:"name"`
	Ranges        []string         `json:"ranges"`
	AutoAssign    bool             `json:"autoAssign"`
	AvoidBuggyIPs bool             `json:"avoidBuggyIPs"`
	Advertisement lb.Advertisement `json:"advertisement"`
	// Allocation is absent in records written before it existed (nil: none).
	Allocation *lb.ServiceAllocation `json:"serviceAllocation,omitempty"`
}

type serviceRecord struct {
	V      int            `json:"v"`
	Origin Origin         `json:"origin"`
	Spec   lb.ServiceSpec `json:"spec"`
}

type assignmentRecord struct {
	V   int          `json:"v"`
	IPs []netip.Addr `json:"ips"`
}

func encodePool(p Pool) ([]byte, error) {
	return json.Marshal(poolRecord{V: recordVersion, Origin: p.Origin, Name: p.Name, Ranges: p.RangeStrings(),
		AutoAssign: p.AutoAssign, AvoidBuggyIPs: p.AvoidBuggyIPs, Advertisement: p.Advertisement, Allocation: p.Allocation})
}

func encodeService(s Service) ([]byte, error) {
	return json.Marshal(serviceRecord{V: recordVersion, Origin: s.Origin, Spec: s.Spec})
}

func encodeAssignment(ips []netip.Addr) ([]byte, error) {
	return json.Marshal(assignmentRecord{V: recordVersion, IPs: ips})
}

// decode checks the version, then decodes strictly (unknown fields are an
// error: they mean a record this version does not understand).
func decode(data []byte, v any) error {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("not a JSON record: %w", err)
	}
	if h.V != recordVersion {
		return fmt.Errorf("record version %d, this edgelb reads version %d", h.V, recordVersion)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	return nil
}

func decodePool(key string, data []byte) (Pool, error) {
	var r poolRecord
	if err := decode(data, &r); err != nil {
		return Pool{}, err
	}
	if r.Name != key {
		return Pool{}, fmt.Errorf("record names pool %q", r.Name)
	}
	if !r.Origin.Valid() {
		return Pool{}, fmt.Errorf("unknown origin %q", r.Origin)
	}
	p := Pool{Origin: r.Origin, Pool: lb.Pool{Name: r.Name, AutoAssign: r.AutoAssign,
		AvoidBuggyIPs: r.AvoidBuggyIPs, Advertisement: r.Advertisement, Allocation: r.Allocation}}
	for _, s := range r.Ranges {
		rg, err := lb.ParseRange(s)
		if err != nil {
			return Pool{}, err
		}
		p.Ranges = append(p.Ranges, rg)
	}
	return p, nil
}

func decodeService(key string, data []byte) (Service, error) {
	var r serviceRecord
	if err := decode(data, &r); err != nil {
		return Service{}, err
	}
	if r.Spec.Name != key {
		return Service{}, fmt.Errorf("record names service %q", r.Spec.Name)
	}
	if !r.Origin.Valid() {
		return Service{}, fmt.Errorf("unknown origin %q", r.Origin)
	}
	return Service{Spec: r.Spec, Origin: r.Origin}, nil
}

func decodeAssignment(data []byte) ([]netip.Addr, error) {
	var r assignmentRecord
	if err := decode(data, &r); err != nil {
		return nil, err
	}
	for _, ip := range r.IPs {
		if !ip.IsValid() {
			return nil, fmt.Errorf("empty address")
		}
	}
	return r.IPs, nil
}
