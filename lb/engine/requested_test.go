package engine

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestRequestedBeforeAutomatic (issue 13): 2,000 services — 150 request
// the very addresses automatic allocation would pick first (the lowest of
// the pool), 1,850 are automatic and named to sort before every requester —
// loaded in three orders, each into a fresh engine, and then once more into
// an engine restarted on the first one's store. Every request is met, no
// service is pending, and all runs assign identically.
func TestRequestedBeforeAutomatic(t *testing.T) {
	const requested, automatic = 150, 1850
	pool := mustPool(t, "p", true, "2001:db8:13::/116") // 4,096 addresses
	base := netip.MustParseAddr("2001:db8:13::")
	var specs []lb.ServiceSpec
	want := map[string]netip.Addr{}
	for i := 0; i < requested; i++ {
		s := svc(fmt.Sprintf("z-requests-%03d", i), 80, "2001:db8:99::1")
		ip := base
		for k := 0; k < i; k++ {
			ip = ip.Next()
		}
		s.VIPs = []netip.Addr{ip}
		want[s.Name] = ip
		specs = append(specs, s)
	}
	for i := 0; i < automatic; i++ {
		s := svc(fmt.Sprintf("a-auto-%04d", i), 80, "2001:db8:99::1")
		s.Families = []lb.Family{lb.IPv6}
		specs = append(specs, s)
	}
	// Steps, as in lb/allocator_test.go: each loads the config in one
	// order into a fresh engine, or (restart) into one restarted on the
	// first step's store; all must assign exactly as the first did.
	steps := []struct {
		name    string
		specs   []lb.ServiceSpec
		restart bool
	}{
		{"requested first", specs, false},
		{"automatic first (names sort before the requesters)", append(slices.Clone(specs[requested:]), specs[:requested]...), false},
		{"shuffled", shuffled(specs, 13), false},
		{"restart on the first store, shuffled again", shuffled(specs, 99), true},
	}
	var first map[string][]netip.Addr
	var firstStore *store.Mem
	for _, step := range steps {
		mem := store.NewMem()
		if step.restart {
			mem = firstStore
		}
		e := start(t, mem, Options{})
		if err := e.SyncConfig(ctx, []lb.Pool{pool}, step.specs); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := assignments(t, e)
		met, pending := check(t, step.name, e, want)
		t.Logf("%s: %d services, %d of %d requests met, %d automatic assigned, %d pending",
			step.name, len(got), met, requested, countAssigned(got)-met, pending)
		if met != requested || pending != 0 || len(got) != requested+automatic {
			t.Errorf("%s: %d/%d requests met, %d pending, %d services", step.name, met, requested, pending, len(got))
		}
		if first == nil {
			first, firstStore = got, mem
			continue
		}
		if diff := diffAssignments(first, got); diff != "" {
			t.Errorf("%s assigns differently from the first step: %s", step.name, diff)
		}
	}
}

func countAssigned(m map[string][]netip.Addr) int {
	n := 0
	for _, ips := range m {
		if len(ips) > 0 {
			n++
		}
	}
	return n
}

func shuffled(in []lb.ServiceSpec, seed uint64) []lb.ServiceSpec {
	out := slices.Clone(in)
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func assignments(t *testing.T, e *Engine) map[string][]netip.Addr {
	t.Helper()
	st, err := e.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]netip.Addr{}
	for _, s := range st {
		out[s.Spec.Name] = s.VIPs
	}
	return out
}

// check counts met requests and pending services, failing on any miss.
func check(t *testing.T, run string, e *Engine, want map[string]netip.Addr) (met, pending int) {
	t.Helper()
	st, err := e.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Pending != "" {
			pending++
			if pending <= 3 {
				t.Errorf("%s: %s pending: %s", run, s.Spec.Name, s.Pending)
			}
		}
		if ip, ok := want[s.Spec.Name]; ok {
			if slices.Equal(s.VIPs, []netip.Addr{ip}) {
				met++
			} else {
				t.Errorf("%s: %s requested %s, has %v", run, s.Spec.Name, ip, s.VIPs)
			}
		}
	}
	return met, pending
}

func diffAssignments(a, b map[string][]netip.Addr) string {
	n, ex := 0, ""
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			if n == 0 {
				ex = fmt.Sprintf("e.g. %s: %v vs %v", k, v, b[k])
			}
			n++
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d vs %d services; %d differ, %s", len(a), len(b), n, ex)
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d differ, %s", n, ex)
}
