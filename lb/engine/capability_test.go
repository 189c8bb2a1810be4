package engine

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// TestDataplaneRefusesUpFront (issue 14): with the nftables dataplane's own
// check, a service asking for lc is refused before anything is stored —
// through PutService (REST: a FieldError on "scheduler" wrapping
// proxy.ErrUnsupported, which the API answers with 422) and through
// SyncConfig (a reload is refused whole) — and the services already there
// stay as they were.
func TestDataplaneRefusesUpFront(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{Check: nft.Check})
	pool := mustPool(t, "p", true, "192.0.2.0/28")
	good := svc("good", 80, "198.51.100.1")
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{good}); err != nil {
		t.Fatal(err)
	}
	before, commits := e.Desired(), mem.Commits()

	bad := svc("bad", 81, "198.51.100.2")
	bad.Scheduler = proxy.LeastConn
	_, _, err := e.PutService(ctx, bad)
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field != "scheduler" || fe.Value != "lc" || !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("PutService lc: %v, want a FieldError on scheduler \"lc\" wrapping ErrUnsupported", err)
	}
	t.Logf("REST: %v", err)
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{good, bad}); err == nil || !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("SyncConfig with lc: %v, want the reload refused", err)
	} else {
		t.Logf("reload: %v", err)
	}
	if mem.Commits() != commits {
		t.Errorf("a refused change was stored (%d → %d commits)", commits, mem.Commits())
	}
	if after := e.Desired(); len(after.Dataplane.Services) != len(before.Dataplane.Services) {
		t.Errorf("desired state changed: %d → %d services", len(before.Dataplane.Services), len(after.Dataplane.Services))
	}
	ok := svc("ok", 82, "198.51.100.3")
	ok.Scheduler = proxy.SourceHash
	if _, _, err := e.PutService(ctx, ok); err != nil {
		t.Fatalf("sh is within nftables' reach: %v", err)
	}
}

// TestRefusedShowsInStatus (issue 14): a service the dataplane refused at
// apply is "failed" in its status (REST, UI) with the reason, the others are
// not, and the mark clears when the dataplane stops refusing it.
func TestRefusedShowsInStatus(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{})
	pool := mustPool(t, "p", true, "192.0.2.0/28")
	if err := e.SyncConfig(ctx, []lb.Pool{pool}, []lb.ServiceSpec{svc("a", 80, "198.51.100.1"), svc("b", 81, "198.51.100.2")}); err != nil {
		t.Fatal(err)
	}
	v0, commits := e.Version(), mem.Commits()
	if err := e.SetRefused(ctx, map[string]string{"b": "kernel says no"}); err != nil {
		t.Fatal(err)
	}
	a, _ := e.Service(ctx, "a")
	b, _ := e.Service(ctx, "b")
	if a.Failed != "" || b.Failed != "kernel says no" {
		t.Fatalf("failed: a %q, b %q", a.Failed, b.Failed)
	}
	if e.Version() == v0 || mem.Commits() != commits {
		t.Errorf("version %d → %d (want moved), commits %d → %d (want none)", v0, e.Version(), commits, mem.Commits())
	}
	if err := e.SetRefused(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.Service(ctx, "b"); b.Failed != "" {
		t.Errorf("b still failed: %q", b.Failed)
	}
}

// TestFWMarkUpFront: a firewall-mark service is programmed as one
// proxy.Service (no VIP allocated, nothing announced); with the nftables
// dataplane's own check it is refused before anything is stored, a
// FieldError on "fwmark" wrapping proxy.ErrUnsupported.
func TestFWMarkUpFront(t *testing.T) {
	marked := lb.ServiceSpec{Name: "marked", FWMark: 7, Method: proxy.NATNoSNAT,
		Backends: []lb.BackendSpec{{Addr: netip.MustParseAddr("198.51.100.1"), Weight: 1}}}
	e := start(t, store.NewMem(), Options{})
	if _, _, err := e.PutService(ctx, marked); err != nil {
		t.Fatal(err)
	}
	d := e.Desired()
	if len(d.Dataplane.Services) != 1 || d.Dataplane.Services[0].Key().String() != "fwmark:7/IPv4" || len(d.VIPs) != 0 {
		t.Fatalf("desired %+v, VIPs %v", d.Dataplane.Services, d.VIPs)
	}
	other := marked
	other.Name = "other"
	var fe *lb.FieldError
	if _, _, err := e.PutService(ctx, other); !errors.As(err, &fe) || fe.Field != "fwmark" {
		t.Fatalf("a second service on mark 7: %v, want a FieldError on fwmark", err)
	}
	mem := store.NewMem()
	n := start(t, mem, Options{Check: nft.Check})
	commits := mem.Commits()
	_, _, err := n.PutService(ctx, marked)
	if !errors.As(err, &fe) || fe.Field != "fwmark" || fe.Value != "7" || !errors.Is(err, proxy.ErrUnsupported) {
		t.Fatalf("nftables: %v, want a FieldError on fwmark \"7\" wrapping ErrUnsupported", err)
	}
	t.Logf("nftables: %v", err)
	if mem.Commits() != commits {
		t.Error("a refused fwmark service was stored")
	}
}
