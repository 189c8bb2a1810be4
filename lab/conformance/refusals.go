package conformance

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// Refusals checks a dataplane's refusal rules without traffic, so the same
// assertions run against a real dataplane (inside the suite) and against
// proxy/fake (root-free): every scheduler and method outside caps is refused
// with proxy.ErrUnsupported naming the service (and a firewall-mark
// service unless caps.FWMark, else it is accepted), and refused per service —
// applied beside a good service, the error is a *proxy.ServiceErrors naming
// only the bad one, so the good one is programmed. Every scheduler in caps
// is accepted. base must be a service dp accepts; it is left applied.
func Refusals(t *testing.T, ctx context.Context, dp proxy.Dataplane, caps Caps, base proxy.Service, nodes []netip.Addr) {
	t.Helper()
	good := base
	good.Port = base.Port + 1
	try := func(what string, svc proxy.Service) {
		t.Helper()
		err := dp.Apply(ctx, proxy.Config{Services: []proxy.Service{svc}, NodeAddrs: nodes})
		switch {
		case err == nil:
			t.Errorf("%s: accepted, want an error wrapping proxy.ErrUnsupported", what)
		case !errors.Is(err, proxy.ErrUnsupported):
			t.Errorf("%s: error %v does not wrap proxy.ErrUnsupported", what, err)
		case !strings.Contains(err.Error(), svc.Key().String()):
			t.Errorf("%s: error %q does not name the service %s", what, err, svc.Key())
		default:
			t.Logf("%s: refused: %v", what, err)
		}
		// Beside a good service: refused alone, the good one programmed.
		err = dp.Apply(ctx, proxy.Config{Services: []proxy.Service{good, svc}, NodeAddrs: nodes})
		failed := proxy.FailedServices(err)
		switch {
		case !proxy.Partial(err):
			t.Errorf("%s beside a good service: %v, want a per-service refusal (*proxy.ServiceErrors)", what, err)
		case len(failed) != 1 || failed[svc.Key()] == nil:
			t.Errorf("%s beside a good service: failed %v, want only %s", what, failed, svc.Key())
		case !errors.Is(failed[svc.Key()], proxy.ErrUnsupported):
			t.Errorf("%s beside a good service: %v does not wrap proxy.ErrUnsupported", what, failed[svc.Key()])
		}
	}
	for _, sc := range proxy.Schedulers {
		if slices.Contains(caps.Schedulers, sc) {
			continue
		}
		svc := base
		svc.Scheduler = sc
		try("scheduler "+string(sc), svc)
	}
	for _, m := range []proxy.Method{proxy.NAT, proxy.NATNoSNAT, proxy.DirectRouting, proxy.Tunnel} {
		if slices.Contains(caps.Methods, m) {
			continue
		}
		svc := base
		svc.Method = m
		try("method "+string(m), svc)
	}
	// A firewall-mark service of base's backends (their ports kept) and a
	// method every fwmark-capable dataplane takes.
	mark := base
	mark.VIP, mark.Port, mark.Protocol, mark.NodePort = netip.Addr{}, 0, 0, 0
	mark.FWMark, mark.Family, mark.Method = 0x2a, base.AddrFamily(), proxy.NATNoSNAT
	if !caps.FWMark {
		try("fwmark", mark)
	} else if err := dp.Apply(ctx, proxy.Config{Services: []proxy.Service{base, mark}, NodeAddrs: nodes}); err != nil {
		t.Errorf("fwmark is in caps but refused: %v", err)
	}
	for _, sc := range caps.Schedulers {
		svc := base
		svc.Scheduler = sc
		if err := dp.Apply(ctx, proxy.Config{Services: []proxy.Service{svc}, NodeAddrs: nodes}); err != nil {
			t.Errorf("scheduler %s is in caps but refused: %v", sc, err)
		}
	}
	if err := dp.Apply(ctx, proxy.Config{Services: []proxy.Service{base}, NodeAddrs: nodes}); err != nil {
		t.Errorf("base service refused: %v", err)
	}
}
