package engine

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// TestAllDownPolicy: with keep, a service whose backends are all down goes
// back to its configured weights and stays announced; with withdraw it keeps
// weight 0 and its VIP leaves the announcement — unless a service sharing
// the VIP still has a healthy backend.
func TestAllDownPolicy(t *testing.T) {
	b1, b2 := netip.MustParseAddrPort("198.51.100.2:80"), netip.MustParseAddrPort("198.51.100.3:80")
	for _, policy := range []AllDownPolicy{"", AllDownKeep, AllDownWithdraw} {
		t.Run(string(policy)+"-", func(t *testing.T) {
			e := start(t, store.NewMem(), Options{AllDown: policy})
			if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/29")); err != nil {
				t.Fatal(err)
			}
			web := svc("web", 80, "198.51.100.2", "198.51.100.3")
			web.SharingKey = "k"
			api := svc("api", 81, "198.51.100.4")
			api.SharingKey = "k"
			if _, _, err := e.PutService(ctx, web); err != nil {
				t.Fatal(err)
			}
			weights := func() (w []uint32, announced int) {
				d := e.Desired()
				for _, ps := range d.Dataplane.Services {
					if ps.Name == "web/80-TCP" {
						for _, b := range ps.Backends {
							w = append(w, b.Weight)
						}
					}
				}
				return w, len(d.VIPs)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(e.SetBackendHealth(ctx, "web", b1, false))
			if w, n := weights(); w[0] != 0 || w[1] != 1 || n != 1 {
				t.Fatalf("one down: weights %v, %d VIPs announced", w, n)
			}
			must(e.SetBackendHealth(ctx, "web", b2, false))
			w, n := weights()
			t.Logf("policy %q, every backend down: weights %v, %d VIPs announced", policy, w, n)
			switch policy {
			case AllDownWithdraw:
				if w[0] != 0 || w[1] != 0 || n != 0 {
					t.Fatalf("withdraw: weights %v, %d VIPs announced; want 0,0 and none", w, n)
				}
				// A healthy service on the same VIP keeps it announced.
				if _, _, err := e.PutService(ctx, api); err != nil {
					t.Fatal(err)
				}
				if _, n := weights(); n != 1 {
					t.Fatalf("withdraw with a healthy sharer: %d VIPs announced, want 1", n)
				}
				must(e.DeleteService(ctx, "api"))
			default:
				if w[0] != 1 || w[1] != 1 || n != 1 {
					t.Fatalf("keep: weights %v, %d VIPs announced; want 1,1 and 1", w, n)
				}
			}
			must(e.SetBackendHealth(ctx, "web", b1, true))
			if w, n := weights(); w[0] != 1 || w[1] != 0 || n != 1 {
				t.Fatalf("one back: weights %v, %d VIPs announced", w, n)
			}
		})
	}
}

// TestMethodsOfTheDataplane: a method the running dataplane cannot do
// (nftables: no tunnel) is refused on "method" by the dataplane's own check,
// wrapping proxy.ErrUnsupported, and nothing is stored.
func TestMethodsOfTheDataplane(t *testing.T) {
	e := start(t, store.NewMem(), Options{Check: nft.Check})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/29")); err != nil {
		t.Fatal(err)
	}
	s := svc("tun", 80, "198.51.100.2")
	s.Method = proxy.Tunnel
	_, _, err := e.PutService(ctx, s)
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field != "method" || !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("tunnel on an nftables-only engine: %v", err)
	}
	t.Logf("refused: %v", err)
	if _, err := e.Service(ctx, "tun"); !errors.Is(err, lb.ErrNotFound) {
		t.Fatalf("refused service stored: %v", err)
	}
	if d := e.Desired(); len(d.Dataplane.Services) != 0 || len(d.VIPs) != 0 {
		t.Fatalf("refused service rendered: %+v", d)
	}
	s.Method = proxy.NATNoSNAT
	if _, _, err := e.PutService(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// A drained backend (configured weight 0) is not in rotation, so it neither
// counts as down nor keeps a service out of the all-down policy: with every
// in-rotation backend down, keep restores the configured weights (the
// drained one stays 0) and withdraw stops announcing the VIP. The node-port
// health filter of the daemon (cmd/edgelb/internal/daemon/nodehealth.go)
// decides the same way.
func TestAllDownIgnoresDrained(t *testing.T) {
	b1, b2 := netip.MustParseAddrPort("198.51.100.2:80"), netip.MustParseAddrPort("198.51.100.3:80")
	for _, policy := range []AllDownPolicy{AllDownKeep, AllDownWithdraw} {
		t.Run(string(policy), func(t *testing.T) {
			e := start(t, store.NewMem(), Options{AllDown: policy})
			if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/29")); err != nil {
				t.Fatal(err)
			}
			web := svc("web", 80, "198.51.100.2", "198.51.100.3", "198.51.100.4")
			web.Backends[2].Weight = 0 // drained
			if _, _, err := e.PutService(ctx, web); err != nil {
				t.Fatal(err)
			}
			for _, b := range []netip.AddrPort{b1, b2} {
				if err := e.SetBackendHealth(ctx, "web", b, false); err != nil {
					t.Fatal(err)
				}
			}
			d := e.Desired()
			var w []uint32
			for _, b := range d.Dataplane.Services[0].Backends {
				w = append(w, b.Weight)
			}
			t.Logf("policy %s: weights %v, %d VIPs announced", policy, w, len(d.VIPs))
			want, wantVIPs := []uint32{1, 1, 0}, 1
			if policy == AllDownWithdraw {
				want, wantVIPs = []uint32{0, 0, 0}, 0
			}
			if !slices.Equal(w, want) || len(d.VIPs) != wantVIPs {
				t.Fatalf("weights %v, %d VIPs announced; want %v and %d", w, len(d.VIPs), want, wantVIPs)
			}
		})
	}
}
