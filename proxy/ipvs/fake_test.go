package ipvs

import (
	"fmt"
	"net/netip"
	"sort"

	"golang.org/x/sys/unix"
)

// fakeIPVS is an in-memory IPVS table with call counters.
type fakeIPVS struct {
	svcs  map[vsKey]virtualServer
	dests map[vsKey]map[netip.AddrPort]realServer
	calls map[string]int
	reads map[vsKey]int // Dests calls per service
}

func newFakeIPVS() *fakeIPVS {
	return &fakeIPVS{svcs: map[vsKey]virtualServer{}, dests: map[vsKey]map[netip.AddrPort]realServer{}, calls: map[string]int{}, reads: map[vsKey]int{}}
}

func (f *fakeIPVS) Services() ([]virtualServer, error) {
	f.calls["Services"]++
	var out []virtualServer
	for _, s := range f.svcs {
		s.Flags |= flagHashed // as the kernel reports
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i].Key, out[j].Key) })
	return out, nil
}

func (f *fakeIPVS) Dests(k vsKey) ([]realServer, error) {
	f.calls["Dests"]++
	f.reads[k]++
	if _, ok := f.svcs[k]; !ok {
		return nil, unix.ESRCH
	}
	var out []realServer
	for _, d := range f.dests[k] {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.Compare(out[j].Addr) < 0 })
	return out, nil
}

func (f *fakeIPVS) AddService(s virtualServer) error {
	f.calls["AddService"]++
	if _, ok := f.svcs[s.Key]; ok {
		return unix.EEXIST
	}
	f.svcs[s.Key] = s
	f.dests[s.Key] = map[netip.AddrPort]realServer{}
	return nil
}

func (f *fakeIPVS) UpdateService(s virtualServer) error {
	f.calls["UpdateService"]++
	if _, ok := f.svcs[s.Key]; !ok {
		return unix.ESRCH
	}
	f.svcs[s.Key] = s
	return nil
}

func (f *fakeIPVS) DelService(k vsKey) error {
	f.calls["DelService"]++
	if _, ok := f.svcs[k]; !ok {
		return unix.ESRCH
	}
	delete(f.svcs, k)
	delete(f.dests, k)
	return nil
}

func (f *fakeIPVS) AddDest(k vsKey, d realServer) error {
	f.calls["AddDest"]++
	m, ok := f.dests[k]
	if !ok {
		return unix.ESRCH
	}
	if _, ok := m[d.Addr]; ok {
		return unix.EEXIST
	}
	d.Active, d.Inactive = 0, 0
	m[d.Addr] = d
	return nil
}

func (f *fakeIPVS) UpdateDest(k vsKey, d realServer) error {
	f.calls["UpdateDest"]++
	m, ok := f.dests[k]
	if !ok {
		return unix.ESRCH
	}
	cur, ok := m[d.Addr]
	if !ok {
		return unix.ENOENT
	}
	cur.Weight, cur.Fwd = d.Weight, d.Fwd
	m[d.Addr] = cur
	return nil
}

func (f *fakeIPVS) DelDest(k vsKey, d realServer) error {
	f.calls["DelDest"]++
	m, ok := f.dests[k]
	if !ok {
		return unix.ESRCH
	}
	if _, ok := m[d.Addr]; !ok {
		return unix.ENOENT
	}
	delete(m, d.Addr)
	return nil
}

func (f *fakeIPVS) Close() error { return nil }

// setConns pretends the kernel counts connections on a destination.
func (f *fakeIPVS) setConns(k vsKey, a netip.AddrPort, active, inactive int) {
	d := f.dests[k][a]
	d.Active, d.Inactive = active, inactive
	f.dests[k][a] = d
}

func (f *fakeIPVS) writes() int {
	return f.calls["AddService"] + f.calls["UpdateService"] + f.calls["DelService"] +
		f.calls["AddDest"] + f.calls["UpdateDest"] + f.calls["DelDest"]
}

func (f *fakeIPVS) resetCalls() { f.calls = map[string]int{}; f.reads = map[vsKey]int{} }

type fakeDevice struct {
	exists bool
	addrs  map[netip.Addr]bool
}

func (d *fakeDevice) Ensure() error {
	d.exists = true
	if d.addrs == nil {
		d.addrs = map[netip.Addr]bool{}
	}
	return nil
}

func (d *fakeDevice) Addrs() (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	for a := range d.addrs {
		out[a] = true
	}
	return out, nil
}

func (d *fakeDevice) AddAddr(a netip.Addr) error {
	if !d.exists {
		return fmt.Errorf("no device")
	}
	d.addrs[a] = true
	return nil
}

func (d *fakeDevice) DelAddr(a netip.Addr) error { delete(d.addrs, a); return nil }
func (d *fakeDevice) Delete() error              { d.exists = false; d.addrs = nil; return nil }

// fakeSNAT obeys nftSNAT's rules: verify rebuilds only after a foreign
// commit (foreign, set by the test as nft by hand would bump the ruleset
// generation); a diff after a foreign commit leaves the table unverified.
type fakeSNAT struct {
	front, masq map[vsKey]bool
	fulls       int
	foreign     bool // someone else committed since the last clean state
}

func (s *fakeSNAT) Set(front, masq map[vsKey]bool, how snatHow) (bool, error) {
	rebuild := how == snatRebuild || s.front == nil || (how == snatVerify && s.foreign)
	if rebuild {
		s.fulls++
		s.foreign = false
	}
	s.front, s.masq = copySet(front), copySet(masq)
	return rebuild, nil
}

func (s *fakeSNAT) Delete() error { s.front, s.masq = nil, nil; return nil }
func (s *fakeSNAT) Close() error  { return nil }
