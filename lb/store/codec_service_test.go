package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// jsonServiceRecord is the reference: what encoding/json writes for s.
func jsonServiceRecord(t testing.TB, s Service) []byte {
	t.Helper()
	b, err := json.Marshal(serviceRecord{V: recordVersion, Origin: s.Origin, Spec: s.Spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The record written by hand is encoding/json's, byte for byte, on random
// specs: every optional field present or absent, nil and empty lists (null
// and [] differ), zero and zoned addresses, strings that need escaping
// (quotes, <>&, control characters, non-ASCII, invalid UTF-8), and a health
// check. A seeded generator: the same specs on every run.
func TestServiceRecordAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 2026))
	strs := []string{"", "web", "bulk-1234", `q"uote`, `back\slash`, "<b>&amp;", "tab\there", "ünïcode", "\xff\xfe", "line\u2028sep", "ctl\x01"}
	addrs := []netip.Addr{{}, netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("::ffff:192.0.2.1"), netip.MustParseAddr("0.0.0.0")}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	for i := range 3000 {
		sp := lb.ServiceSpec{Name: pick(strs), Pool: pick(strs), SharingKey: pick(strs),
			Scheduler: proxy.Scheduler(pick(strs)), Method: proxy.Method(pick(strs))}
		if r.IntN(3) == 0 {
			sp.Affinity = time.Duration(r.Int64N(1e12)) - 1e9
		}
		switch r.IntN(3) {
		case 1:
			sp.VIPs = []netip.Addr{}
		case 2:
			for range 1 + r.IntN(3) {
				sp.VIPs = append(sp.VIPs, addrs[r.IntN(len(addrs))])
			}
		}
		switch r.IntN(3) {
		case 1:
			sp.Families = []lb.Family{}
		case 2:
			sp.Families = []lb.Family{lb.IPv4, lb.IPv6, lb.Family(r.IntN(256))}[:1+r.IntN(3)]
		}
		switch r.IntN(3) {
		case 1:
			sp.Ports = []lb.PortSpec{}
		case 2:
			for range 1 + r.IntN(3) {
				sp.Ports = append(sp.Ports, lb.PortSpec{Name: pick(strs), Port: uint16(r.IntN(65536)), Protocol: proxy.Protocol(r.IntN(256)),
					NodePort: uint16(r.IntN(2) * r.IntN(65536)), TargetPort: uint16(r.IntN(2) * r.IntN(65536))})
			}
		}
		switch r.IntN(3) {
		case 1:
			sp.Backends = []lb.BackendSpec{}
		case 2:
			for range 1 + r.IntN(12) {
				sp.Backends = append(sp.Backends, lb.BackendSpec{Addr: addrs[r.IntN(len(addrs))],
					Port: uint16(r.IntN(2) * r.IntN(65536)), Weight: r.Uint32() >> r.IntN(32)})
			}
		}
		if r.IntN(4) == 0 {
			sp.Health = &lb.HealthCheck{Type: pick(strs), Path: pick(strs), Host: pick(strs), Expect: r.IntN(600),
				Interval: time.Duration(r.Int64N(1e10)), Timeout: time.Second, Rise: r.IntN(5), Fall: r.IntN(5), Port: uint16(r.IntN(65536))}
		}
		s := Service{Origin: Origin(pick(append(strs, "config", "api"))), Spec: sp}
		got, _ := encodeService(s)
		if want := jsonServiceRecord(t, s); !bytes.Equal(got, want) {
			t.Fatalf("spec %d:\nby hand      %s\nencoding/json %s", i, got, want)
		}
		if framed := frameService(&s); !bytes.Equal(framed, frame(s.Spec.Name, got)) {
			t.Fatalf("spec %d: frameService differs from frame(encodeService)", i)
		}
	}
}

// codec_service.go writes these types' fields by hand: a field added,
// renamed or retagged here must be written there too (and this list
// updated), or records would silently lose it.
func TestServiceRecordFields(t *testing.T) {
	for _, c := range []struct {
		typ  any
		want []string
	}{
		{serviceRecord{}, []string{"V v", "Origin origin", "Spec spec"}},
		{lb.ServiceSpec{}, []string{"Name name", "VIPs vips,omitempty", "Families families,omitempty", "Pool pool,omitempty",
			"SharingKey sharingKey,omitempty", "Ports ports", "Backends backends", "Scheduler scheduler",
			"Affinity affinityTimeout,omitempty", "Method method", "Health healthCheck,omitempty"}},
		{lb.PortSpec{}, []string{"Name name,omitempty", "Port port", "Protocol protocol", "NodePort nodePort,omitempty", "TargetPort targetPort,omitempty"}},
		{lb.BackendSpec{}, []string{"Addr address", "Port port,omitempty", "Weight weight"}},
	} {
		ty := reflect.TypeOf(c.typ)
		var got []string
		for i := range ty.NumField() {
			f := ty.Field(i)
			got = append(got, f.Name+" "+f.Tag.Get("json"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s has fields %q; appendServiceRecord writes %q: update codec_service.go (and this list)", ty, got, c.want)
		}
	}
}

// BenchmarkServiceRecord: one record of 10 backends, by hand and through
// encoding/json (the ratio is what a first start saves per service).
func BenchmarkServiceRecord(b *testing.B) {
	s := Service{Origin: OriginConfig, Spec: lb.ServiceSpec{Name: "bulk-1234", Pool: "bulk", SharingKey: "bulk",
		VIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}, Ports: []lb.PortSpec{{Port: 10000, Protocol: proxy.TCP}},
		Scheduler: proxy.WeightedRoundRobin, Method: proxy.NAT}}
	for i := range 10 {
		s.Spec.Backends = append(s.Spec.Backends, lb.BackendSpec{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(200 + i)}), Port: 8080, Weight: 1})
	}
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = frameService(&s)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = frame(s.Spec.Name, jsonServiceRecord(b, s))
		}
	})
}
