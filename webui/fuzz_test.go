package webui

import (
	"errors"
	"reflect"
	"testing"

	"github.com/edgelb/edgelb/lb"
)

// Both fuzz targets check the REST boundary: any body either parses into
// typed values that survive a round trip (render → decode → parse gives the
// same value) or is refused with a FieldError that names a field. Never a
// panic, never an untyped error.

func checkRefusal(t *testing.T, err error) {
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("refusal is not a FieldError naming a field: %T %v", err, err)
	}
}

func FuzzPoolBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"default","addresses":["192.0.2.0/24","2001:db8::/120"],"autoAssign":true}`,
		`{"name":"x","addresses":["192.0.2.10-192.0.2.20"],"avoidBuggyIPs":true,"advertisement":{"communities":["65000:1","no-export"],"largeCommunities":["1:2:3"],"localPref":100,"aggregationLength":24}}`,
		`{"name":"x","addresses":["192.0.2.1/24"]}`,
		`{"name":"x","addresses":"192.0.2.0/24"}`,
		`{"name":"x","colour":1}`,
		`{"name":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var dto PoolSpec
		if err := lb.DecodeStrict(body, &dto); err != nil {
			checkRefusal(t, err)
			return
		}
		p, err := parsePool(dto)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		again, err := marshal(lb.PoolInputOf(p))
		if err != nil {
			t.Fatal(err)
		}
		var dto2 PoolSpec
		if err := lb.DecodeStrict(again, &dto2); err != nil {
			t.Fatalf("re-decode %s: %v", again, err)
		}
		p2, err := parsePool(dto2)
		if err != nil {
			t.Fatalf("re-parse %s: %v", again, err)
		}
		if !reflect.DeepEqual(normPool(p), normPool(p2)) {
			t.Fatalf("round trip changed the pool:\n%+v\n%+v", p, p2)
		}
	})
}

// normPool makes empty and nil slices compare equal.
func normPool(p lb.Pool) lb.Pool {
	if len(p.Advertisement.Communities) == 0 {
		p.Advertisement.Communities = nil
	}
	if len(p.Advertisement.LargeCommunities) == 0 {
		p.Advertisement.LargeCommunities = nil
	}
	return p
}

func FuzzServiceBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"web","vips":["192.0.2.10","2001:db8::10"],"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080,"nodePort":30080}],"backends":[{"address":"198.51.100.2","weight":2},{"address":"198.51.100.3","port":8081,"weight":0}],"scheduler":"wrr","affinityTimeout":"3h","method":"nat"}`,
		`{"name":"dns","families":["IPv6","IPv4"],"pool":"default","sharingKey":"k","ports":[{"port":53,"protocol":"udp"}],"backends":[],"healthCheck":{"type":"http","path":"/healthz","host":"x","expectStatus":200,"interval":"5s","timeout":"1s","rise":2,"fall":3,"port":8080}}`,
		`{"name":"x","ports":[{"port":0}]}`,
		`{"name":"x","ports":[{"port":80,"colour":1}]}`,
		`{"name":"x","ports":[{"port":80}],"affinityTimeout":"-1s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var dto ServiceSpec
		if err := lb.DecodeStrict(body, &dto); err != nil {
			checkRefusal(t, err)
			return
		}
		s, err := parseService(dto)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		again, err := marshal(lb.InputOf(s))
		if err != nil {
			t.Fatal(err)
		}
		var dto2 ServiceSpec
		if err := lb.DecodeStrict(again, &dto2); err != nil {
			t.Fatalf("re-decode %s: %v", again, err)
		}
		s2, err := parseService(dto2)
		if err != nil {
			t.Fatalf("re-parse %s: %v", again, err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the service:\n%+v\n%+v", s, s2)
		}
	})
}
