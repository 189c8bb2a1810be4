package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables/binaryutil"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/maglev"
)

// MaxBuckets bounds the buckets of one weighted service: weights are reduced
// by their gcd and, when they still sum to more, scaled down to this many
// buckets (a share is then exact to within 1/MaxBuckets). A service never
// gets fewer buckets than eligible backends.
const MaxBuckets = 128

// Service ids are tagged in their top byte: an id travels in the ct mark
// from the services chain to postrouting, and the tag tells it apart from a
// mark someone else set (and from proxy.CTMark, 0x0e in its top byte).
// The next two bits are the id's class, what postrouting does with the
// connection, so that it needs no lookup for the common cases: masquerade
// (nat) or not (nat-nosnat), or — with ClientIP affinity — look the id up
// in the post map (its chain remembers the client's backend). A service
// whose class changes gets a new id. The low 22 bits number the services.
//
// Affinity is class 0 because ids written before classes existed are all
// 0 and all have post map entries: after an upgrade they keep working
// through @post until the first sync has given them their class (and a
// sticky service keeps its id, so its clients keep their backends).
const (
	idTag     uint32 = 0xed000000
	idTagMask uint32 = 0xff000000

	idClassMask   uint32 = 0x00c00000
	idClassSticky uint32 = 0x00000000 // affinity: postrouting looks the id up in @post
	idClassMasq   uint32 = 0x00800000 // masquerade, no affinity
	idClassPlain  uint32 = 0x00c00000 // no masquerade, no affinity

	idNumMask uint32 = 0x003fffff
	idNumMax         = idNumMask
)

// idClass is the class of a service that renders to p.
func (p post) idClass() uint32 {
	switch {
	case p.aff > 0:
		return idClassSticky
	case p.masq:
		return idClassMasq
	}
	return idClassPlain
}

// viaMap reports whether connections of the service pass the post map (and
// a post-* chain) in postrouting; the other classes are handled by fixed
// rules there.
func (p post) viaMap() bool { return p.aff > 0 }

// pickKind is how a bucket is chosen.
type pickKind byte

const (
	pickRandom  pickKind = 'r' // rr, wrr: numgen random mod N
	pickSrcHash pickKind = 's' // sh: jhash(saddr) mod N
	pickDstHash pickKind = 'd' // dh: jhash(daddr) mod N
	pickMaglev  pickKind = 'm' // mh: jhash(saddr . sport . daddr . dport) mod M, a Maglev table
	jhashSeed            = 0x0ed6e1b0
	pickPrefix           = "pick-"
	postPrefix           = "post-"
)

// pick names the chain a service dispatches to: its bucket count N, how a
// bucket is chosen, and whether a remembered backend (ClientIP affinity) is
// tried first. Services with the same pick share the chain, so the number
// of chains is the number of distinct picks in use, not of services.
type pick struct {
	kind   pickKind
	n      int
	sticky bool
}

// chain is the name of the pick chain ("nobackend" when N is 0).
func (p pick) chain() string {
	if p.n == 0 {
		return noBackendChain
	}
	s := pickPrefix + string(rune(p.kind)) + strconv.Itoa(p.n)
	if p.sticky {
		s += "-a"
	}
	return s
}

// parsePick is the inverse of chain, for chains read back from the kernel.
func parsePick(name string) (pick, bool) {
	rest, ok := strings.CutPrefix(name, pickPrefix)
	if !ok || len(rest) < 2 {
		return pick{}, false
	}
	p := pick{kind: pickKind(rest[0])}
	if p.kind != pickRandom && p.kind != pickSrcHash && p.kind != pickDstHash && p.kind != pickMaglev {
		return pick{}, false
	}
	num, sticky := strings.CutSuffix(rest[1:], "-a")
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return pick{}, false
	}
	p.n, p.sticky = n, sticky
	return p, p.chain() == name
}

// post names the chain a connection passes in postrouting: masquerade or
// not (the forwarding method), and the affinity timeout to remember the
// client's backend for.
type post struct {
	masq bool
	aff  time.Duration // whole milliseconds; 0: none
}

func (p post) chain() string {
	s := postPrefix + "n"
	if p.masq {
		s = postPrefix + "m"
	}
	if p.aff > 0 {
		s += "-a" + strconv.FormatInt(p.aff.Milliseconds(), 10)
	}
	return s
}

func parsePost(name string) (post, bool) {
	rest, ok := strings.CutPrefix(name, postPrefix)
	if !ok || len(rest) < 1 || (rest[0] != 'm' && rest[0] != 'n') {
		return post{}, false
	}
	p := post{masq: rest[0] == 'm'}
	if aff, ok := strings.CutPrefix(rest[1:], "-a"); ok {
		ms, err := strconv.ParseInt(aff, 10, 64)
		if err != nil || ms <= 0 {
			return post{}, false
		}
		p.aff = time.Duration(ms) * time.Millisecond
	}
	return p, p.chain() == name
}

// svcState is one service as programmed: the accepted input and what it
// renders to.
type svcState struct {
	// in is the service as given (a copy: keepInput): for the cheap
	// "unchanged?" test and the refusal bisection.
	in   proxy.Service
	key  proxy.Key
	v6   bool
	id   uint32 // idTag | post.idClass() | n
	pick pick
	post post
	// be holds bucket i's backend (addr . port) at i*stride: one block
	// instead of a slice per bucket keeps the model cheap for the GC.
	be  []byte
	gen uint64 // the Apply that last saw it (see Dataplane.plan)
}

// stride is the length of one backend value.
func (st *svcState) stride() int {
	if st.v6 {
		return 20
	}
	return 8
}

// buckets is N.
func (st *svcState) buckets() int { return len(st.be) / st.stride() }

func (st *svcState) bucket(i int) []byte {
	n := st.stride()
	return st.be[i*n : (i+1)*n : (i+1)*n]
}

// frontend is one address:port/proto a service answers on; node ports use
// the unspecified address of their family.
type frontend struct {
	addr  netip.Addr
	port  uint16
	proto proxy.Protocol
}

func (f frontend) String() string {
	if f.addr.IsUnspecified() {
		fam := "IPv4"
		if f.addr.Is6() {
			fam = "IPv6"
		}
		return fmt.Sprintf("nodeport %d/%s (%s)", f.port, f.proto, fam)
	}
	return netip.AddrPortFrom(f.addr, f.port).String() + "/" + f.proto.String()
}

func (st *svcState) frontends() []frontend {
	var fs []frontend
	if st.key.VIP.IsValid() {
		fs = append(fs, frontend{st.key.VIP, st.key.Port, st.key.Protocol})
	}
	if st.key.NodePort != 0 {
		any := netip.IPv4Unspecified()
		if st.v6 {
			any = netip.IPv6Unspecified()
		}
		fs = append(fs, frontend{any, st.key.NodePort, st.key.Protocol})
	}
	return fs
}

// keepInput stores s as st's input, with its own copy of the backends: a
// caller that reuses its slices cannot change the model behind its back.
func (st *svcState) keepInput(s *proxy.Service) {
	st.in = *s
	st.in.Backends = slices.Clone(s.Backends)
}

// input is the service st was rendered from (a fresh backends slice the
// caller may keep).
func (st *svcState) input() proxy.Service {
	in := st.in
	in.Backends = slices.Clone(in.Backends)
	return in
}

// sameInput reports whether a service equals what was accepted before
// (backends compared in order: a reordering re-renders, to the same elements).
func sameInput(a, b *proxy.Service) bool {
	if !sameFields(a, b) || len(a.Backends) != len(b.Backends) {
		return false
	}
	for i := range a.Backends {
		x, y := &a.Backends[i], &b.Backends[i]
		// Field by field: much cheaper than the generated struct equality,
		// and every Apply compares every backend of every service.
		if x.Weight != y.Weight || x.Draining != y.Draining || x.Addr.Port() != y.Addr.Port() || x.Addr.Addr() != y.Addr.Addr() {
			return false
		}
	}
	return true
}

// sameFields compares everything but the backends.
func sameFields(a, b *proxy.Service) bool {
	return a.Name == b.Name && a.VIP == b.VIP && a.Port == b.Port && a.Protocol == b.Protocol &&
		a.NodePort == b.NodePort && a.Scheduler == b.Scheduler && a.Affinity == b.Affinity &&
		a.Method == b.Method && a.Family == b.Family
}

// svcError wraps err with the service's identity (its key, which the engine
// and the conformance suite look for, and its name).
func svcError(s *proxy.Service, err error) error {
	if s.Name != "" {
		return fmt.Errorf("nft: service %s (%s): %w", s.Key(), s.Name, err)
	}
	return fmt.Errorf("nft: service %s: %w", s.Key(), err)
}

// prepare validates one service and renders it (without an id).
// Refusals of what nftables cannot express wrap proxy.ErrUnsupported.
func prepare(s *proxy.Service) (*svcState, error) {
	st := &svcState{key: s.Key()}
	if s.FWMark != 0 {
		return nil, svcError(s, fmt.Errorf("fwmark %d: %w (a firewall-mark service is IPVS's; use the ipvs dataplane)", s.FWMark, proxy.ErrUnsupported))
	}
	if s.Protocol != proxy.TCP && s.Protocol != proxy.UDP {
		return nil, svcError(s, fmt.Errorf("protocol %q: want TCP or UDP", s.Protocol))
	}
	switch {
	case s.VIP.IsValid():
		if s.VIP.Zone() != "" || s.VIP.Is4In6() {
			return nil, svcError(s, fmt.Errorf("vip %q: want a plain IPv4 or IPv6 address", s.VIP))
		}
		if s.Port == 0 {
			return nil, svcError(s, errors.New("port 0: a VIP needs a port"))
		}
		st.v6 = s.VIP.Is6()
	case s.NodePort == 0:
		return nil, svcError(s, errors.New("neither a VIP nor a node port"))
	default:
		// A node port serves one family (Key.Family): a dual-stack node
		// port is two services.
		st.v6 = st.key.Family == proxy.IPv6
	}
	switch s.Method {
	case "", proxy.NAT:
		st.post.masq = true
	case proxy.NATNoSNAT:
	case proxy.DirectRouting, proxy.Tunnel:
		return nil, svcError(s, fmt.Errorf("method %q: %w (nftables can only NAT; use the ipvs dataplane)", s.Method, proxy.ErrUnsupported))
	default:
		return nil, svcError(s, fmt.Errorf("method %q: unknown", s.Method))
	}
	weighted := true
	switch s.Scheduler {
	case proxy.RoundRobin:
		st.pick.kind, weighted = pickRandom, false
	case "", proxy.WeightedRoundRobin:
		st.pick.kind = pickRandom
	case proxy.SourceHash:
		st.pick.kind = pickSrcHash
	case proxy.DestinationHash:
		st.pick.kind = pickDstHash
	case proxy.MaglevHash:
		st.pick.kind = pickMaglev
	case proxy.LeastConn, proxy.WeightedLeastConn, proxy.ShortestExpected, proxy.NeverQueue:
		// These need per-backend connection counts that a stateless ruleset
		// cannot keep; pretending (weighted random) would silently change
		// behaviour, so refuse.
		return nil, svcError(s, fmt.Errorf("scheduler %q: %w (nftables does rr, wrr, sh, dh, mh; use the ipvs dataplane)", s.Scheduler, proxy.ErrUnsupported))
	default:
		return nil, svcError(s, fmt.Errorf("scheduler %q: unknown", s.Scheduler))
	}
	if s.Affinity < 0 {
		return nil, svcError(s, fmt.Errorf("affinity %q: negative", s.Affinity))
	}
	if s.Affinity > 0 {
		// The kernel keeps timeouts in milliseconds; round up so a tiny
		// affinity is not silently dropped.
		st.post.aff = (s.Affinity + time.Millisecond - 1).Truncate(time.Millisecond)
		st.pick.sticky = true
	}

	type cand struct {
		ap netip.AddrPort
		w  uint32
	}
	// A short list is checked for repeats in a loop and its eligible
	// backends kept on the stack: a cold sync prepares every service, and
	// a map and a slice each were a tenth of its fresh heap at 10,000.
	var eligBuf [16]cand
	elig := eligBuf[:0]
	var seen map[netip.AddrPort]bool
	if len(s.Backends) > 32 {
		seen = make(map[netip.AddrPort]bool, len(s.Backends))
	}
	for i, b := range s.Backends {
		a := b.Addr.Addr()
		if !a.IsValid() || b.Addr.Port() == 0 || a.Zone() != "" || a.Is4In6() {
			return nil, svcError(s, fmt.Errorf("backend %q: want a plain address with a port", b.Addr))
		}
		if a.Is6() != st.v6 {
			return nil, svcError(s, fmt.Errorf("backend %q: address family differs from the service's (nftables NAT cannot translate between IPv4 and IPv6)", b.Addr))
		}
		twice := seen[b.Addr]
		if seen == nil {
			twice = slices.ContainsFunc(s.Backends[:i], func(p proxy.Backend) bool { return p.Addr == b.Addr })
		} else {
			seen[b.Addr] = true
		}
		if twice {
			return nil, svcError(s, fmt.Errorf("backend %q: listed twice", b.Addr))
		}
		if b.Weight > 0 && !b.Draining {
			elig = append(elig, cand{b.Addr, b.Weight})
		}
	}
	st.keepInput(s)
	// Sorted so the same backends in another order render the same elements.
	slices.SortFunc(elig, func(a, b cand) int { return a.ap.Compare(b.ap) })
	if st.pick.kind == pickMaglev {
		bs := make([]maglev.Backend, len(elig))
		for i, c := range elig {
			bs[i] = maglev.Backend{Addr: c.ap, Weight: c.w}
		}
		st.maglev(bs)
		return st, nil
	}
	w := make([]uint32, len(elig))
	for i, c := range elig {
		w[i] = 1
		if weighted {
			w[i] = c.w
		}
	}
	order := bucketOrder(w)
	st.be = make([]byte, 0, len(order)*st.stride())
	for _, i := range order {
		st.be = appendBackend(st.be, elig[i].ap)
	}
	st.pick.n = len(order)
	return st, nil
}

// keepPositions rearranges a re-rendered service's buckets so every bucket
// whose backend is still wanted keeps it: changing one backend among ten
// rewrites one element, not the nine that would shift, and a hash scheduler
// (sh, dh) keeps its clients on their backends. Only when N is unchanged:
// with another N the modulus moves every client anyway.
func (st *svcState) keepPositions(old *svcState) {
	n, stride := st.buckets(), st.stride()
	// A Maglev table's slots are its own (the same on every gateway);
	// between two tables only the slots whose backend changed differ.
	if st.pick.kind == pickMaglev || old == nil || old.v6 != st.v6 || old.buckets() != n || n == 0 {
		return
	}
	left := map[string]int{} // wanted backend → buckets still to place
	for i := 0; i < n; i++ {
		left[string(st.bucket(i))]++
	}
	out := make([]byte, len(st.be))
	placed := make([]bool, n)
	for i := 0; i < n; i++ {
		if b := old.bucket(i); left[string(b)] > 0 {
			left[string(b)]--
			copy(out[i*stride:], b)
			placed[i] = true
		}
	}
	// The rest, in the fresh layout's (interleaved) order.
	j := 0
	for i := 0; i < n; i++ {
		b := st.bucket(i)
		if left[string(b)] == 0 {
			continue
		}
		left[string(b)]--
		for placed[j] {
			j++
		}
		copy(out[j*stride:], b)
		placed[j] = true
	}
	st.be = out
}

// bucketCounts turns weights into per-backend bucket counts: exact after
// dividing by the gcd when they sum to at most MaxBuckets (or to no more
// than one bucket each), otherwise proportional by largest remainder with
// at least one bucket per backend.
func bucketCounts(w []uint32) []int {
	counts := make([]int, len(w))
	if len(w) == 0 {
		return counts
	}
	g := uint64(0)
	for _, x := range w {
		g = gcd(g, uint64(x))
	}
	var total uint64
	for _, x := range w {
		total += uint64(x) / g
	}
	limit := uint64(max(MaxBuckets, len(w)))
	if total <= limit {
		for i, x := range w {
			counts[i] = int(uint64(x) / g)
		}
		return counts
	}
	type rem struct {
		i    int
		frac uint64
	}
	var rems []rem
	used := 0
	for i, x := range w {
		q := uint64(x) / g * limit
		counts[i] = int(q / total)
		if counts[i] == 0 {
			counts[i] = 1
		}
		used += counts[i]
		rems = append(rems, rem{i, q % total})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.frac > b.frac:
			return -1
		case a.frac < b.frac:
			return 1
		}
		return 0
	})
	for k := 0; used < int(limit) && k < len(rems); k++ {
		counts[rems[k].i]++
		used++
	}
	return counts
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// bucketOrder lays the buckets out in smooth weighted round-robin order
// (nginx's), so consecutive buckets alternate between backends instead of
// running in blocks. Returns the backend index of each bucket.
func bucketOrder(w []uint32) []int {
	counts := bucketCounts(w)
	total := 0
	for _, c := range counts {
		total += c
	}
	cur := make([]int, len(counts))
	out := make([]int, 0, total)
	for len(out) < total {
		best := -1
		for i, c := range counts {
			cur[i] += c
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, best)
	}
	return out
}

// Element encodings. Each field of a concatenation is padded to 4 bytes, as
// the kernel's 32-bit registers hold them. Numbers the kernel computes
// (numgen, jhash) are host-endian, so ids and buckets are too; ports are
// network order.

func encU32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

func encPort(p uint16) []byte { return []byte{byte(p >> 8), byte(p), 0, 0} }

func encProto(p proxy.Protocol) []byte { return []byte{byte(p), 0, 0, 0} }

func encVIPKey(a netip.Addr, proto proxy.Protocol, port uint16) []byte {
	b := a.AsSlice()
	b = append(b, encProto(proto)...)
	return append(b, encPort(port)...)
}

func encNodePortKey(proto proxy.Protocol, port uint16) []byte {
	return append(encProto(proto), encPort(port)...)
}

// encBucketKey is one allocation: a cold sync makes one per backend
// bucket (100,000 at 10,000 services × 10 backends).
func encBucketKey(id uint32, bucket int) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint32(b, id)
	binary.NativeEndian.PutUint32(b[4:], uint32(bucket))
	return b
}

func encBackend(ap netip.AddrPort) []byte { return appendBackend(nil, ap) }

// appendBackend appends encBackend(ap) to b without allocating.
func appendBackend(b []byte, ap netip.AddrPort) []byte {
	switch a := ap.Addr(); {
	case a.Is4():
		a4 := a.As4()
		b = append(b, a4[:]...)
	case a.IsValid():
		a16 := a.As16()
		b = append(b, a16[:]...)
	}
	p := ap.Port()
	return append(b, byte(p>>8), byte(p), 0, 0)
}

func decU32(b []byte) uint32 { return binaryutil.NativeEndian.Uint32(b) }

// maglev renders scheduler mh: the buckets are a Maglev table of
// maglev.TableSize(backends) slots built from the eligible backends'
// identities and weights, so every gateway holding the same backends holds
// the same buckets, and the pick chain's 5-tuple hash sends a flow to the
// same backend on each of them (even a mid-stream packet without conntrack
// state). No eligible backend: no buckets (nobackend).
func (st *svcState) maglev(bs []maglev.Backend) {
	if len(bs) == 0 {
		return
	}
	m := maglev.TableSize(len(bs))
	table, err := maglev.Build(bs, m)
	if err != nil {
		// prepare has checked the addresses (valid, distinct) and M is
		// one of maglev.Sizes: Build cannot refuse them.
		panic(err)
	}
	enc := make([][]byte, len(bs))
	for i, b := range bs {
		enc[i] = encBackend(b.Addr)
	}
	st.be = make([]byte, 0, m*st.stride())
	for _, k := range table {
		st.be = append(st.be, enc[k]...)
	}
	st.pick.n = m
}
