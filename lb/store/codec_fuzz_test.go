package store

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzRecords: the state file's records are read back from disk (or from
// etcd, written by other gateways), so their decoders are parsers of
// untrusted bytes. For any key and bytes: no decoder panics; what one
// accepts encodes again to a record it accepts, unchanged (a load and a
// write-back cannot drift); and a framed record survives unframe unchanged while any single changed byte of
// it is refused (CRC-32C catches every
// error burst up to 32 bits, so this cannot fail by chance).
func FuzzRecords(f *testing.F) {
	p := testPool(f, "p1", OriginAPI, "192.0.2.0/28", "2001:db8::/120")
	pool, _ := encodePool(p)
	svc, _ := encodeService(testService("web", OriginConfig))
	asg, _ := encodeAssignment([]netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::a")})
	f.Add("p1", pool)
	f.Add("web", svc)
	f.Add("web", asg)
	f.Add("web", frame("web", svc))
	f.Add("x", []byte(`{"v":1,"ips":[""]}`))
	f.Add("x", []byte(`{"v":2}`))
	f.Add("x", []byte(`{"v":1,"origin":"api","name":"x","ranges":["10.0.0.9-10.0.0.1"]}`))
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		if p, err := decodePool(key, data); err == nil {
			enc, err := encodePool(p)
			if err != nil {
				t.Fatalf("decoded pool does not encode: %v", err)
			}
			p2, err := decodePool(key, enc)
			if err != nil {
				t.Fatalf("re-encoded pool refused: %v\n%s", err, enc)
			}
			if enc2, _ := encodePool(p2); !bytes.Equal(enc, enc2) {
				t.Fatalf("pool drifts on a write-back:\n%s\n%s", enc, enc2)
			}
		}
		if s, err := decodeService(key, data); err == nil {
			enc, err := encodeService(s)
			if err != nil {
				t.Fatalf("decoded service does not encode: %v", err)
			}
			s2, err := decodeService(key, enc)
			if err != nil {
				t.Fatalf("re-encoded service refused: %v\n%s", err, enc)
			}
			if enc2, _ := encodeService(s2); !bytes.Equal(enc, enc2) {
				t.Fatalf("service drifts on a write-back:\n%s\n%s", enc, enc2)
			}
		}
		if ips, err := decodeAssignment(data); err == nil {
			enc, err := encodeAssignment(ips)
			if err != nil {
				t.Fatalf("decoded assignment does not encode: %v", err)
			}
			ips2, err := decodeAssignment(enc)
			if err != nil {
				t.Fatalf("re-encoded assignment refused: %v\n%s", err, enc)
			}
			if enc2, _ := encodeAssignment(ips2); !bytes.Equal(enc, enc2) {
				t.Fatalf("assignment drifts on a write-back:\n%s\n%s", enc, enc2)
			}
		}
		_, _ = unframe(key, data) // must not panic on anything

		framed := frame(key, data)
		body, err := unframe(key, framed)
		if err != nil || !bytes.Equal(body, data) {
			t.Fatalf("frame → unframe: %v, %q, want %q", err, body, data)
		}
		if len(framed) > 4096 {
			return // the flips below are O(n²); small records say the same
		}
		for i := range framed {
			bad := bytes.Clone(framed)
			bad[i] ^= 0x80
			if _, err := unframe(key, bad); err == nil {
				t.Fatalf("byte %d of a %d-byte framed record changed, unframe accepted it", i, len(framed))
			}
		}
	})
}
