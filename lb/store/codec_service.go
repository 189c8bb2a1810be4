package store

import (
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"strconv"

	"github.com/edgelb/edgelb/lb"
)

// appendServiceRecord appends a service's record — serviceRecord{V, Origin,
// Spec} — byte for byte as encoding/json writes it, without reflection: a
// first start at 10,000 services × 10 backends encoded 10,000 records
// through encoding/json at ~5.8 µs each, a third of the store commit that
// start-up waits for (issue 18). TestServiceRecordAsJSON compares the bytes
// with encoding/json's on random specs (FuzzServiceRecordAsJSON too), and
// TestServiceRecordFields fails when a field is added to the spec types
// without being written here. The health check, rare and nested, goes
// through encoding/json.
func appendServiceRecord(b []byte, s *Service) []byte {
	sp := &s.Spec
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, recordVersion, 10)
	b = append(b, `,"origin":`...)
	b = appendJSONString(b, string(s.Origin))
	b = append(b, `,"spec":{"name":`...)
	b = appendJSONString(b, sp.Name)
	if len(sp.VIPs) > 0 {
		b = append(b, `,"vips":[`...)
		for i, a := range sp.VIPs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONAddr(b, a)
		}
		b = append(b, ']')
	}
	if len(sp.Families) > 0 {
		// Family is a uint8, so encoding/json writes the list as bytes:
		// base64 in a string ([4,6] is "BAY="), the stored format.
		fam := make([]byte, len(sp.Families))
		for i, f := range sp.Families {
			fam[i] = byte(f)
		}
		b = append(b, `,"families":"`...)
		b = base64.StdEncoding.AppendEncode(b, fam)
		b = append(b, '"')
	}
	if sp.Pool != "" {
		b = append(b, `,"pool":`...)
		b = appendJSONString(b, sp.Pool)
	}
	if sp.SharingKey != "" {
		b = append(b, `,"sharingKey":`...)
		b = appendJSONString(b, sp.SharingKey)
	}
	b = append(b, `,"ports":`...)
	b = appendList(b, sp.Ports, appendPortSpec)
	b = append(b, `,"backends":`...)
	b = appendList(b, sp.Backends, appendBackendSpec)
	b = append(b, `,"scheduler":`...)
	b = appendJSONString(b, string(sp.Scheduler))
	if sp.Affinity != 0 {
		b = append(b, `,"affinityTimeout":`...)
		b = strconv.AppendInt(b, int64(sp.Affinity), 10)
	}
	b = append(b, `,"method":`...)
	b = appendJSONString(b, string(sp.Method))
	if sp.Health != nil {
		b = append(b, `,"healthCheck":`...)
		h, _ := json.Marshal(sp.Health) // plain fields: never fails
		b = append(b, h...)
	}
	return append(b, "}}"...)
}

// appendList writes a list as encoding/json does: null when nil, [] when
// empty.
func appendList[T any](b []byte, xs []T, each func([]byte, *T) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, &xs[i])
	}
	return append(b, ']')
}

func appendPortSpec(b []byte, p *lb.PortSpec) []byte {
	b = append(b, '{')
	if p.Name != "" {
		b = append(b, `"name":`...)
		b = appendJSONString(b, p.Name)
		b = append(b, ',')
	}
	b = append(b, `"port":`...)
	b = strconv.AppendUint(b, uint64(p.Port), 10)
	b = append(b, `,"protocol":`...)
	b = strconv.AppendUint(b, uint64(p.Protocol), 10)
	if p.NodePort != 0 {
		b = append(b, `,"nodePort":`...)
		b = strconv.AppendUint(b, uint64(p.NodePort), 10)
	}
	if p.TargetPort != 0 {
		b = append(b, `,"targetPort":`...)
		b = strconv.AppendUint(b, uint64(p.TargetPort), 10)
	}
	return append(b, '}')
}

func appendBackendSpec(b []byte, be *lb.BackendSpec) []byte {
	b = append(b, `{"address":`...)
	b = appendJSONAddr(b, be.Addr)
	if be.Port != 0 {
		b = append(b, `,"port":`...)
		b = strconv.AppendUint(b, uint64(be.Port), 10)
	}
	b = append(b, `,"weight":`...)
	b = strconv.AppendUint(b, uint64(be.Weight), 10)
	return append(b, '}')
}

// appendJSONAddr writes an address as its MarshalText does ("" for the
// zero Addr), quoted; a zone goes through appendJSONString's checks.
func appendJSONAddr(b []byte, a netip.Addr) []byte {
	if a.Zone() != "" {
		return appendJSONString(b, a.String())
	}
	b = append(b, '"')
	b = a.AppendTo(b)
	return append(b, '"')
}

// appendJSONString writes s quoted. Plain ASCII without quotes,
// backslashes or the characters encoding/json escapes for HTML (<, >, &)
// is copied; anything else is left to encoding/json, whose escaping
// (control characters, U+2028/9, invalid UTF-8) is the reference.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string: never fails
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
