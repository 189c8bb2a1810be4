package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

// model is a deliberately naive allocator: the oracle the real one is
// checked against (what may be assigned, and who holds what).
type model struct {
	pools  []Pool
	owners map[netip.Addr]map[string]Request
}

func (m *model) poolOf(ip netip.Addr) *Pool {
	for i := range m.pools {
		if m.pools[i].Contains(ip) {
			return &m.pools[i]
		}
	}
	return nil
}

func (m *model) named(n string) *Pool {
	for i := range m.pools {
		if m.pools[i].Name == n {
			return &m.pools[i]
		}
	}
	return nil
}

// canHold: may svc hold ip with req given the current owners?
func (m *model) canHold(svc string, ip netip.Addr, req Request) bool {
	p := m.poolOf(ip)
	if p == nil || !p.Usable(ip) || (req.Pool != "" && p.Name != req.Pool) {
		return false
	}
	for o, oreq := range m.owners[ip] {
		if o == svc {
			continue
		}
		if req.SharingKey == "" || oreq.SharingKey != req.SharingKey {
			return false
		}
		for _, pp := range req.Ports {
			if slices.Contains(oreq.Ports, pp) {
				return false
			}
		}
	}
	return true
}

func (m *model) hold(svc string, ip netip.Addr, req Request) {
	for other, os := range m.owners {
		if other != ip && other.Is4() == ip.Is4() {
			delete(os, svc)
			if len(os) == 0 {
				delete(m.owners, other)
			}
		}
	}
	if m.owners[ip] == nil {
		m.owners[ip] = map[string]Request{}
	}
	m.owners[ip][svc] = req
}

func (m *model) release(svc string, ip netip.Addr) {
	delete(m.owners[ip], svc)
	if len(m.owners[ip]) == 0 {
		delete(m.owners, ip)
	}
}

// allocatable: some address in the candidate pools that svc may hold.
func (m *model) allocatable(svc string, fam Family, req Request, cands []netip.Addr) bool {
	for _, ip := range cands {
		if FamilyOf(ip) != fam {
			continue
		}
		p := m.poolOf(ip)
		if p == nil || (req.Pool == "" && !p.AutoAssign) {
			continue
		}
		if m.canHold(svc, ip, req) {
			return true
		}
	}
	return false
}

func (m *model) ips(svc string) []netip.Addr {
	var out []netip.Addr
	for ip, os := range m.owners {
		if _, ok := os[svc]; ok {
			out = append(out, ip)
		}
	}
	sortAddrs(out)
	return out
}

var fuzzPoolSets = [][]Pool{
	{
		{Name: "a", AutoAssign: true, AvoidBuggyIPs: true, Ranges: []Range{{netip.MustParseAddr("192.0.2.0"), netip.MustParseAddr("192.0.2.7")}}},
		{Name: "b", Ranges: []Range{{netip.MustParseAddr("192.0.2.8"), netip.MustParseAddr("192.0.2.11")}}},
		{Name: "c", AutoAssign: true, Ranges: []Range{{netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8::3")}}},
	},
	{
		{Name: "a", AutoAssign: true, Ranges: []Range{{netip.MustParseAddr("192.0.2.0"), netip.MustParseAddr("192.0.2.3")}}},
		{Name: "b", Ranges: []Range{{netip.MustParseAddr("192.0.2.8"), netip.MustParseAddr("192.0.2.15")}}},
		{Name: "c", AutoAssign: true, Ranges: []Range{{netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8::1")}}},
	},
	{
		{Name: "a", AutoAssign: true, Ranges: []Range{
			{netip.MustParseAddr("192.0.2.0"), netip.MustParseAddr("192.0.2.5")},
			{netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("192.0.2.15")},
			{netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8::7")},
		}},
	},
}

// fuzzAddrs are the addresses ops name: every pool address of every set
// plus a few outside all of them.
func fuzzAddrs() []netip.Addr {
	var out []netip.Addr
	for i := 0; i < 18; i++ {
		out = append(out, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
	}
	for i := 0; i < 9; i++ {
		out = append(out, netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i)))
	}
	return out
}

// FuzzAllocator runs random operation sequences against the allocator and
// the model: results agree, and no address is ever held by services that
// may not share it.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 1, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0})
	f.Add([]byte{0, 0, 1, 0x15, 0, 1, 1, 0x16, 0, 2, 1, 0x05, 3, 0, 0, 0, 1, 3, 2, 0x1d})
	f.Add([]byte{4, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 2, 0, 0, 1, 3, 0, 0, 4, 2, 0, 0, 4, 0, 0, 0})
	addrs := fuzzAddrs()
	keys := []string{"", "k1", "k2"}
	allPorts := []PortProto{{80, 6}, {443, 6}, {80, 17}}
	pools := []string{"", "", "a", "b", "c", "zz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		a := NewAllocator()
		m := &model{owners: map[netip.Addr]map[string]Request{}}
		if err := a.SetPools(fuzzPoolSets[0]); err != nil {
			t.Fatal(err)
		}
		m.pools = fuzzPoolSets[0]
		for len(data) >= 4 {
			op, b1, b2, b3 := data[0], data[1], data[2], data[3]
			data = data[4:]
			svc := fmt.Sprint("s", b1%6)
			req := Request{Pool: pools[int(b2>>5)%len(pools)], SharingKey: keys[int(b3>>4)%len(keys)]}
			for i, p := range allPorts {
				if b3&(1<<i) != 0 {
					req.Ports = append(req.Ports, p)
				}
			}
			switch op % 6 {
			case 0: // assign
				ip := addrs[int(b2)%len(addrs)]
				want := (req.Pool == "" || m.named(req.Pool) != nil) && m.canHold(svc, ip, req)
				err := a.Assign(svc, ip, req)
				if (err == nil) != want {
					t.Fatalf("Assign(%s, %s, %+v) = %v, model says ok=%v; owners %v", svc, ip, req, err, want, m.owners[ip])
				}
				if err == nil {
					m.hold(svc, ip, req)
				}
			case 1, 2: // allocate
				fam := IPv4
				if b3&8 != 0 {
					fam = IPv6
				}
				want := (req.Pool == "" || m.named(req.Pool) != nil) && m.allocatable(svc, fam, req, addrs)
				ip, err := a.Allocate(svc, fam, req)
				if (err == nil) != want {
					t.Fatalf("Allocate(%s, %s, %+v) = %s, %v; model says ok=%v", svc, fam, req, ip, err, want)
				}
				if err == nil {
					p := m.poolOf(ip)
					if FamilyOf(ip) != fam || !m.canHold(svc, ip, req) || (req.Pool == "" && !p.AutoAssign && !slices.Contains(m.ips(svc), ip)) {
						t.Fatalf("Allocate(%s, %s, %+v) = %s: not allowed (owners %v)", svc, fam, req, ip, m.owners[ip])
					}
					m.hold(svc, ip, req)
				}
			case 3: // release one
				ip := addrs[int(b2)%len(addrs)]
				a.Release(svc, ip)
				m.release(svc, ip)
			case 4: // release all
				a.ReleaseAll(svc)
				for _, ip := range m.ips(svc) {
					m.release(svc, ip)
				}
			case 5: // switch pool sets
				next := fuzzPoolSets[int(b1)%len(fuzzPoolSets)]
				want := true
				nm := &model{pools: next}
				for ip := range m.owners {
					old, now := m.poolOf(ip), nm.poolOf(ip)
					if now == nil || old.Name != now.Name || !now.Usable(ip) {
						want = false
					}
				}
				err := a.SetPools(next)
				if (err == nil) != want {
					t.Fatalf("SetPools(set %d) = %v, model says ok=%v", int(b1)%len(fuzzPoolSets), err, want)
				}
				if err == nil {
					m.pools = next
				}
			}
			checkAgainstModel(t, a, m, addrs)
		}
	})
}

func checkAgainstModel(t *testing.T, a *Allocator, m *model, addrs []netip.Addr) {
	t.Helper()
	for i := 0; i < 6; i++ {
		svc := fmt.Sprint("s", i)
		got, want := a.IPs(svc), m.ips(svc)
		if !slices.Equal(got, want) {
			t.Fatalf("IPs(%s) = %v, model %v", svc, got, want)
		}
		if len(got) > 2 || len(got) == 2 && got[0].Is4() == got[1].Is4() {
			t.Fatalf("%s holds %v: more than one per family", svc, got)
		}
	}
	for _, ip := range addrs {
		owners := a.Owners(ip)
		var want []string
		for s := range m.owners[ip] {
			want = append(want, s)
		}
		slices.Sort(want)
		if !slices.Equal(owners, want) {
			t.Fatalf("Owners(%s) = %v, model %v", ip, owners, want)
		}
		// The safety property itself, checked on the model's requests.
		for _, x := range owners {
			for _, y := range owners {
				if x >= y {
					continue
				}
				rx, ry := m.owners[ip][x], m.owners[ip][y]
				if rx.SharingKey == "" || rx.SharingKey != ry.SharingKey {
					t.Fatalf("%s held by %s and %s with keys %q/%q", ip, x, y, rx.SharingKey, ry.SharingKey)
				}
				for _, p := range rx.Ports {
					if slices.Contains(ry.Ports, p) {
						t.Fatalf("%s held by %s and %s, both on %v", ip, x, y, p)
					}
				}
			}
		}
	}
	for _, p := range m.pools {
		n := 0
		for ip := range m.owners {
			if p.Contains(ip) {
				n++
			}
		}
		if used := a.Used(p.Name); used != n {
			t.Fatalf("Used(%s) = %d, model %d", p.Name, used, n)
		}
	}
}
