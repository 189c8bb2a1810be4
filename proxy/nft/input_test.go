package nft

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// randBackend draws from a small space so that two draws are often equal:
// IPv4, IPv6, 4-in-6 and zoned addresses, draining or not, a few weights.
func randBackend(r *rand.Rand) proxy.Backend {
	var a netip.Addr
	switch r.IntN(4) {
	case 0:
		a = netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(3))})
	case 1:
		a = netip.AddrFrom16([16]byte{0xfd, 15: byte(r.IntN(3))})
	case 2:
		a = netip.AddrFrom16(netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(3))}).As16()) // 4-in-6
	default:
		a = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: 1}).WithZone("eth" + string(rune('0'+r.IntN(2))))
	}
	return proxy.Backend{
		Addr:     netip.AddrPortFrom(a, uint16(8080+r.IntN(2))),
		Weight:   uint32(r.IntN(3)) << (8 * r.IntN(4)), // 0, small, and every byte of the word
		Draining: r.IntN(4) == 0,
	}
}

func randBackends(r *rand.Rand) []proxy.Backend {
	out := make([]proxy.Backend, r.IntN(4))
	for i := range out {
		out[i] = randBackend(r)
	}
	return out
}

// TestPackedInputRoundTrip: what the model keeps packed unpacks to exactly
// what was given (zones are the one thing packing drops; prepare refuses
// them before a service is kept).
func TestPackedInputRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		bs := randBackends(r)
		want := slices.Clone(bs)
		for i := range want {
			want[i].Addr = netip.AddrPortFrom(want[i].Addr.Addr().WithZone(""), want[i].Addr.Port())
		}
		p := packBackends(nil, bs)
		if len(p) != packedLen(bs) {
			t.Fatalf("%v: packed %d bytes, packedLen says %d", bs, len(p), packedLen(bs))
		}
		if got := unpackBackends(p); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round trip of %v: got %v", want, got)
		}
	}
}

// TestPackedSameInputAgrees: comparing against the packed input answers as
// comparing two whole services does, over random pairs that are often equal
// and differ in one field when not (a zoned backend is never the same: a
// kept service cannot have one).
func TestPackedSameInputAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	equal := 0
	for n := 0; n < 50000; n++ {
		a := proxy.Service{Name: "s", VIP: netip.MustParseAddr("192.0.2.1"), Port: 80, Protocol: proxy.TCP, Backends: randBackends(r)}
		b := a
		b.Backends = slices.Clone(a.Backends)
		switch r.IntN(5) {
		case 0: // the same
		case 1:
			b.Backends = randBackends(r)
		case 2:
			if len(b.Backends) > 0 {
				b.Backends[r.IntN(len(b.Backends))] = randBackend(r)
			}
		case 3:
			b.Backends = append(b.Backends, randBackend(r))
		default:
			b.Port = 81
		}
		var st svcState
		st.keepInput(&a)
		want := sameInput(&a, &b) && !slices.ContainsFunc(a.Backends, func(x proxy.Backend) bool { return x.Addr.Addr().Zone() != "" })
		if got := st.sameInput(&b); got != want {
			t.Fatalf("packed sameInput(%v, %v) = %v, whole services say %v", a, b, got, want)
		}
		if want {
			equal++
		}
		if in := st.input(); !sameFields(&in, &a) {
			t.Fatalf("input() = %v, kept %v", in, a)
		}
	}
	if equal < 5000 {
		t.Fatalf("only %d of 50000 pairs were the same: the test would not see a wrong \"different\"", equal)
	}
}
