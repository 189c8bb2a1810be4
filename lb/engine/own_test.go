package engine

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// servedVIPs lists the VIPs a desired state programs and announces.
func servedVIPs(d lb.Desired) (programmed, announced []netip.Addr) {
	for _, s := range d.Dataplane.Services {
		if s.VIP.IsValid() && !slices.Contains(programmed, s.VIP) {
			programmed = append(programmed, s.VIP)
		}
	}
	for _, v := range d.VIPs {
		announced = append(announced, v.Addr)
	}
	return programmed, announced
}

// Issue 36: own addresses are refused at write; an address that becomes
// the gateway's own later leaves only the services using it out of the
// desired state, reported failed, and they come back when it goes.
func TestOwnAddresses(t *testing.T) {
	own := lb.NewOwnAddrs()
	own.AddPrefix(netip.MustParsePrefix("203.0.113.1/24"), "interface veth0")
	own.Add(addr("192.0.2.200"), "api.listen")
	e := start(t, store.NewMem(), Options{OwnAddrs: own})

	// At write: pool, VIP, backend.
	if _, err := e.CreatePool(ctx, mustPool(t, "bad", true, "203.0.113.0/28")); !errors.Is(err, lb.ErrOwnAddress) {
		t.Fatalf("pool holding a network address: %v", err)
	}
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/25")); err != nil {
		t.Fatal(err)
	}
	web := svc("web", 80, "198.51.100.2")
	web.VIPs = []netip.Addr{addr("192.0.2.10")}
	bad := web
	bad.Name, bad.Backends = "bad", []lb.BackendSpec{{Addr: addr("192.0.2.200"), Port: 8080, Weight: 1}}
	bad.VIPs = []netip.Addr{addr("192.0.2.11")}
	_, _, err := e.PutService(ctx, bad)
	var fe *lb.FieldError
	if !errors.Is(err, lb.ErrOwnAddress) || !errors.As(err, &fe) || fe.Field != "backends[0].address" || fe.Value != "192.0.2.200:8080" {
		t.Fatalf("API address as backend: %v", err)
	}
	if _, _, err := e.PutService(ctx, web); err != nil {
		t.Fatal(err)
	}
	other := svc("other", 80, "198.51.100.3")
	other.VIPs = []netip.Addr{addr("192.0.2.12")}
	if _, _, err := e.PutService(ctx, other); err != nil {
		t.Fatal(err)
	}

	// Later: web's VIP becomes an interface address.
	later := own.Clone()
	later.AddPrefix(netip.MustParsePrefix("192.0.2.10/32"), "interface veth1")
	if err := e.SetOwnAddrs(ctx, later); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Service(ctx, "web")
	if !strings.Contains(st.Failed, "192.0.2.10 is this gateway's own address (interface veth1)") {
		t.Errorf("web's status: %+v", st)
	}
	if st, _ := e.Service(ctx, "other"); st.Failed != "" {
		t.Errorf("other's status: %+v", st)
	}
	prog, ann := servedVIPs(e.Desired())
	if !slices.Equal(prog, []netip.Addr{addr("192.0.2.12")}) || !slices.Equal(ann, prog) {
		t.Errorf("with the address own: programmed %v, announced %v", prog, ann)
	}
	// Gone again: programmed again, as it was.
	if err := e.SetOwnAddrs(ctx, own); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Service(ctx, "web"); st.Failed != "" || !slices.Equal(st.VIPs, web.VIPs) {
		t.Errorf("web's status after: %+v", st)
	}
	prog, _ = servedVIPs(e.Desired())
	slices.SortFunc(prog, netip.Addr.Compare)
	if !slices.Equal(prog, []netip.Addr{addr("192.0.2.10"), addr("192.0.2.12")}) {
		t.Errorf("after: programmed %v", prog)
	}
}
