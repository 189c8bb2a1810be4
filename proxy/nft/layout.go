package nft

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"reflect"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
)

// The layout is flat and data-driven (see README.md): a fixed handful of
// chains and rules per address family, and every service only as elements
// of shared maps, so the kernel's work for a change is proportional to the
// elements changed. Two tables, ip edgelb and ip6 edgelb (as kube-proxy's
// nftables mode), each:
//
//	vip       daddr . l4proto . dport → id
//	np        l4proto . dport         → id          (daddr in nodeaddrs)
//	dispatch  id                      → goto pick-<kind><N>[-a] | goto nobackend
//	be        id . bucket             → backend addr . port
//	post      id                      → goto post-<m|n>-a<ms>   (affinity only)
//	aff       id . saddr              → backend addr . port (timeout, written by post-*-a*)
//
//	prerouting, output (nat, dstnat): jump services
//	services:    ct mark set <frontend> map @vip|@np  ct mark vmap @dispatch
//	pick-r3:     dnat to ct mark . numgen random mod 3 map @be
//	pick-s3-a:   dnat to ct mark . saddr map @aff;  dnat to ct mark . jhash saddr mod 3 map @be
//	postrouting (nat, srcnat), by the id's class (bits 22-23):
//	             ct mark & 0xffc00000 == 0xed800000  ct mark set CTMark  masquerade
//	             ct mark & 0xffc00000 == 0xedc00000  ct mark set CTMark
//	             ct mark & 0xffc00000 == 0xed000000  ct mark vmap @post
//	post-m-a300000: update @aff { ct mark . saddr timeout 5m : daddr . th dport }  ct mark set CTMark  masquerade
//
// The service id rides in the connection's ct mark from the services chain
// to postrouting (tagged 0xed in its top byte so it is never mistaken for a
// mark someone else set), where it is replaced with proxy.CTMark. Its class
// says what postrouting does, so a service without affinity costs no lookup
// there (a hand-written replica of the layout with the lookup, timed once
// beside lab/faults' first-packet test, was ~2 % slower; the real
// daemon's ratio moved less than its run-to-run noise). That is also how nft itself
// would write it: every rule here reads back with `nft list ruleset`.
// (Registers cannot carry the id across chains: kernels since 6.12 refuse
// rules reading registers they did not write.)

// AffinitySize bounds the remembered client→backend entries per address
// family (the kernel's default for such a map is 65,535). When it is full,
// new clients are balanced without being remembered.
const AffinitySize = 1 << 20

// Set names (the same in both tables).
const (
	setVIP      = "vip"
	setNP       = "np"
	setNodes    = "nodeaddrs"
	setDispatch = "dispatch"
	setBE       = "be"
	setPost     = "post"
	setAff      = "aff"
)

// Chain names (pick-* and post-* chains are named by pick.chain, post.chain).
const (
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
	chainServices    = "services"
	noBackendChain   = "nobackend"
)

// commentPrefix marks rules edgelb wrote; rules without it (someone else's)
// are left alone by Resync.
const commentPrefix = "edgelb:"

// Registers as nft numbers them: 1..4 are the 128-bit ones, 8+n is the
// 32-bit register n (NFT_REG32_00+n) inside them. Concatenations start at
// register 1 and continue in 32-bit steps, as nft lays them out, so the CLI
// reads every rule back.
const (
	reg1 = 1 // NFT_REG_1 = NFT_REG32_00..03
	reg2 = 2 // NFT_REG_2 = NFT_REG32_04..07
	reg3 = 3 // NFT_REG_3 = NFT_REG32_08..11
)

func r32(n uint32) uint32 { return 8 + n }

// fam is what differs between the two tables.
type fam struct {
	v6         bool
	family     nftables.TableFamily
	nfproto    uint32
	addr       nftables.SetDatatype
	addrLen    uint32
	saddr      uint32 // network header offsets
	daddr      uint32
	rejectCode uint8
	// snat is the floating source address method nat translates to
	// (Options.SourceAddresses); invalid: masquerade to the gateway's own
	// address on the way out.
	snat netip.Addr
	// syncEvents: the services chain limits a translated connection's
	// conntrack events (Options.SyncEvents).
	syncEvents bool
}

var (
	fam4 = fam{false, nftables.TableFamilyIPv4, unix.NFPROTO_IPV4, nftables.TypeIPAddr, 4, 12, 16, 3 /* ICMP_PORT_UNREACH */, netip.Addr{}, false}
	fam6 = fam{true, nftables.TableFamilyIPv6, unix.NFPROTO_IPV6, nftables.TypeIP6Addr, 16, 8, 24, 4 /* ICMPV6_PORT_UNREACH */, netip.Addr{}, false}
	fams = [2]fam{fam4, fam6}
)

func famOf(v6 bool) fam {
	if v6 {
		return fam6
	}
	return fam4
}

// famOf is the dataplane's fam (with its source address) of a family.
func (d *Dataplane) famOf(v6 bool) fam {
	if v6 {
		return d.fams[1]
	}
	return d.fams[0]
}

func (f fam) String() string {
	if f.v6 {
		return "ip6"
	}
	return "ip"
}

// after is the 32-bit register following an address loaded at reg1.
func (f fam) after() uint32 { return r32(f.addrLen / 4) }

// setDefs are a table's sets, in creation order.
func (f fam) setDefs(t *nftables.Table) []*nftables.Set {
	m := func(name string, k, v nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: k, DataType: v,
			Concatenation: len(nftables.ConcatSetTypeElements(k)) > 1}
	}
	mark := nftables.TypeMark
	be := nftables.MustConcatSetType(f.addr, nftables.TypeInetService)
	aff := m(setAff, nftables.MustConcatSetType(mark, f.addr), be)
	aff.HasTimeout, aff.Dynamic, aff.Size = true, true, AffinitySize
	return []*nftables.Set{
		m(setVIP, nftables.MustConcatSetType(f.addr, nftables.TypeInetProto, nftables.TypeInetService), mark),
		m(setNP, nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService), mark),
		{Table: t, Name: setNodes, KeyType: f.addr},
		m(setDispatch, mark, nftables.TypeVerdict),
		m(setBE, nftables.MustConcatSetType(mark, mark), be),
		m(setPost, mark, nftables.TypeVerdict),
		aff,
	}
}

// baseChains are the fixed chains, in creation order (regular chains before
// the hooked ones that jump to them).
func baseChains(t *nftables.Table) []*nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return []*nftables.Chain{
		{Table: t, Name: chainServices},
		{Table: t, Name: noBackendChain},
		{Table: t, Name: chainPrerouting, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting,
			Priority: nftables.ChainPriorityNATDest, Policy: &accept},
		{Table: t, Name: chainOutput, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput,
			Priority: nftables.ChainPriorityNATDest, Policy: &accept},
		{Table: t, Name: chainPostrouting, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource, Policy: &accept},
	}
}

func (f fam) loadSaddr(r uint32) expr.Any {
	return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddr, Len: f.addrLen}
}

func (f fam) loadDaddr(r uint32) expr.Any {
	return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddr, Len: f.addrLen}
}

func l4proto(r uint32) expr.Any { return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: r} }

func dport(r uint32) expr.Any {
	return &expr.Payload{DestRegister: r, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
}

func loadMark() expr.Any { return &expr.Ct{Key: expr.CtKeyMARK, Register: reg1} }

func lookupData(set string) expr.Any {
	return &expr.Lookup{SourceRegister: reg1, DestRegister: reg1, IsDestRegSet: true, SetName: set}
}

func vmap(set string) expr.Any {
	return &expr.Lookup{SourceRegister: reg1, DestRegister: 0, IsDestRegSet: true, SetName: set}
}

// dnat to the backend the last lookup left in reg1 (address, then port).
func (f fam) dnat() expr.Any {
	port := f.after()
	return &expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nfproto, RegAddrMin: reg1, RegAddrMax: reg1,
		RegProtoMin: port, RegProtoMax: port, Specified: true}
}

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(e ...expr.Any) []expr.Any { return e }

// rule is one rule of a chain with its identity (the comment Resync checks).
type rule struct {
	name  string
	exprs []expr.Any
}

// comment is "edgelb:<chain>/<name>:<hash of the expressions>", so a rule
// written by an older layout no longer matches and is replaced.
func (r rule) comment(chain string) string {
	h := fnv.New32a()
	for _, e := range r.exprs {
		fmt.Fprintf(h, "%T%+v;", e, reflect.ValueOf(e).Elem().Interface())
	}
	return fmt.Sprintf("%s%s/%s:%08x", commentPrefix, chain, r.name, h.Sum32())
}

func (r rule) build(t *nftables.Table, chain string) *nftables.Rule {
	return &nftables.Rule{Table: t, Chain: &nftables.Chain{Table: t, Name: chain}, Exprs: r.exprs,
		UserData: userdata.AppendString(nil, userdata.TypeComment, r.comment(chain))}
}

// syncEventMask is IPCT_DESTROY | IPCT_ASSURED
// (include/uapi/linux/netfilter/nf_conntrack_common.h: ip_conntrack_events):
// no IPCT_PROTOINFO, the event of every TCP state change, and no IPCT_NEW —
// a connection is worth syncing once established (conntrackd takes the
// update of an entry it never saw as new).
const syncEventMask = 1<<2 | 1<<4

// rulesOf returns the rules a chain of family f must hold, in order.
func (f fam) rulesOf(chain string) []rule {
	switch chain {
	case chainPrerouting, chainOutput:
		return []rule{{"jump", one(&expr.Verdict{Kind: expr.VerdictJump, Chain: chainServices})}}
	case chainServices:
		// The mark is set only when the frontend lookup hits, and dispatch
		// reads it in the same rule: a mark someone else set never
		// dispatches.
		setAndDispatch := one(&expr.Ct{Key: expr.CtKeyMARK, Register: reg1, SourceRegister: true}, loadMark(), vmap(setDispatch))
		if f.syncEvents {
			// ct event set new,destroy,assured — on the connection's first
			// packet (a nat chain), before conntrack confirms it.
			setAndDispatch = cat(one(&expr.Ct{Key: expr.CtKeyMARK, Register: reg1, SourceRegister: true},
				&expr.Immediate{Register: reg1, Data: encU32(syncEventMask)},
				&expr.Ct{Key: expr.CtKeyEVENTMASK, Register: reg1, SourceRegister: true}), one(loadMark(), vmap(setDispatch)))
		}
		return []rule{
			{"vip", cat(one(f.loadDaddr(reg1), l4proto(f.after()), dport(f.after()+1), lookupData(setVIP)), setAndDispatch)},
			{"nodeport", cat(one(f.loadDaddr(reg1), &expr.Lookup{SourceRegister: reg1, SetName: setNodes},
				l4proto(reg1), dport(r32(1)), lookupData(setNP)), setAndDispatch)},
		}
	case chainPostrouting:
		// By the id's class (model.go): masquerade, leave, or look the id
		// up in @post (affinity). No lookup for a service without affinity.
		class := func(c uint32) []expr.Any {
			return one(loadMark(),
				&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: encU32(idTagMask | idClassMask), Xor: encU32(0)},
				&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: encU32(idTag | c)})
		}
		return []rule{
			{"masq", cat(class(idClassMasq), markDone(), f.masq())},
			{"plain", cat(class(idClassPlain), markDone())},
			{"post", cat(class(idClassSticky), one(loadMark(), vmap(setPost)))},
		}
	case noBackendChain:
		// A service without an eligible backend refuses at once rather than
		// letting the packet be routed on to wherever the VIP leads.
		return []rule{{"reject", one(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: f.rejectCode})}}
	}
	if p, ok := parsePick(chain); ok {
		return f.pickRules(p)
	}
	if p, ok := parsePost(chain); ok {
		return f.postRules(p)
	}
	return nil
}

// pickRules: with affinity, first reuse the backend remembered for this
// client (the rule ends at the dnat when the lookup hits), else pick a
// bucket: numgen random (rr, wrr) or jhash of the source (sh) or
// destination (dh) address, mod N, or of the 5-tuple mod M (mh, flowHash).
func (f fam) pickRules(p pick) []rule {
	var rs []rule
	if p.sticky {
		rs = append(rs, rule{"sticky", one(loadMark(), f.loadSaddr(r32(1)), lookupData(setAff), f.dnat())})
	}
	var bucket []expr.Any
	switch p.kind {
	case pickMaglev:
		bucket = f.flowHash(uint32(p.n))
	case pickSrcHash, pickDstHash:
		load := f.loadSaddr(r32(6))
		if p.kind == pickDstHash {
			load = f.loadDaddr(r32(6))
		}
		bucket = one(load, &expr.Hash{SourceRegister: r32(6), DestRegister: r32(1), Length: f.addrLen,
			Modulus: uint32(p.n), Seed: jhashSeed, Type: expr.HashTypeJenkins})
	default:
		bucket = one(&expr.Numgen{Register: r32(1), Modulus: uint32(p.n), Type: unix.NFT_NG_RANDOM})
	}
	return append(rs, rule{"pick", cat(one(loadMark()), bucket, one(lookupData(setBE), f.dnat()))})
}

// flowHash leaves jhash(saddr . sport . daddr . dport) mod n in r32(1): the
// 5-tuple (the protocol is implied by the frontend the service was found
// by) laid out as nft concatenates it, from r32(6) on — 16 bytes for IPv4,
// 40 for IPv6, which ends exactly at the last register, r32(15). The
// kernel's jhash with a fixed seed is the same on every gateway, so a flow
// hashes to the same Maglev slot wherever it lands.
func (f fam) flowHash(n uint32) []expr.Any {
	a := f.addrLen / 4
	return one(f.loadSaddr(r32(6)),
		&expr.Payload{DestRegister: r32(6 + a), Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		f.loadDaddr(r32(6+a+1)),
		dport(r32(6+2*a+1)),
		&expr.Hash{SourceRegister: r32(6), DestRegister: r32(1), Length: 2*f.addrLen + 8,
			Modulus: n, Seed: jhashSeed, Type: expr.HashTypeJenkins})
}

// postRules run once per new connection after the DNAT: remember the
// client's backend (affinity; the packet's destination is the backend by
// now), replace the id in the ct mark with proxy.CTMark, masquerade (NAT).
//
// The update is a rule of its own: if the map is full it fails and ends
// only that rule, the connection still gets its mark and masquerade.
func (f fam) postRules(p post) []rule {
	var rs []rule
	if p.aff > 0 {
		// key ct mark . saddr from reg1; data daddr . dport from the next
		// free 128-bit register.
		data := uint32(reg2)
		if f.v6 {
			data = reg3
		}
		rs = append(rs, rule{"remember", one(loadMark(), f.loadSaddr(r32(1)), f.loadDaddr(data), dport(r32((data-1)*4+f.addrLen/4)),
			&expr.Dynset{SrcRegKey: reg1, SrcRegData: data, SetName: setAff, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: p.aff})})
	}
	es := markDone()
	if p.masq {
		es = append(es, f.masq()...)
	}
	return append(rs, rule{"mark", es})
}

// masq translates the source of a method-nat connection: to the floating
// source address when one is set (`snat to S`: the backend's reply goes to
// whichever gateway owns S now, which holds the connection when state is
// synced), else masquerade (the gateway's own address on the way out).
// reg1 is free here: markDone has stored the mark.
func (f fam) masq() []expr.Any {
	if !f.snat.IsValid() {
		return one(&expr.Masq{})
	}
	return one(&expr.Immediate{Register: reg1, Data: f.snat.AsSlice()},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: f.nfproto, RegAddrMin: reg1})
}

// markDone replaces the service id in the ct mark with proxy.CTMark, the
// mark edgelb's flows keep (the flow view and dumps filter on it).
func markDone() []expr.Any {
	return one(&expr.Immediate{Register: reg1, Data: encU32(proxy.CTMark)},
		&expr.Ct{Key: expr.CtKeyMARK, Register: reg1, SourceRegister: true})
}

// repairRules returns a fix when edgelb's rules in a chain differ from want
// (missing, reordered, from an older layout, edited): delete edgelb's rules
// there and append the right ones. Rules without edgelb's comment belong to
// someone else and stay.
func repairRules(t *nftables.Table, chain string, want []rule, have []*nftables.Rule) (op, bool) {
	var ours []*nftables.Rule
	var comments []string
	for _, r := range have {
		if c, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok && strings.HasPrefix(c, commentPrefix) {
			ours = append(ours, r)
			comments = append(comments, c)
		}
	}
	same := len(ours) == len(want)
	for i := 0; same && i < len(ours); i++ {
		same = comments[i] == want[i].comment(chain)
	}
	if same {
		return op{}, false
	}
	return op{len(ours) + len(want), func(c *nftables.Conn) error {
		ch := &nftables.Chain{Table: t, Name: chain}
		for _, r := range ours {
			if err := c.DelRule(&nftables.Rule{Table: t, Chain: ch, Handle: r.Handle}); err != nil {
				return fmt.Errorf("nft: delete rule %d of %s: %w", r.Handle, chain, err)
			}
		}
		for _, r := range want {
			c.AddRule(r.build(t, chain))
		}
		return nil
	}}, true
}
