package ipvs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nftgen"
)

// TableName is the nftables table (family inet) the IPVS dataplane owns.
// IPVS rewrites only the destination; this table
//   - sets edgelb's ct mark (proxy.CTMark) on connections to any frontend, so
//     the conntrack flow reader sees IPVS connections too — for a
//     firewall-mark service, on connections whose packets carry its mark,
//     read in the input and output hooks at filter priority: after the
//     operator's marking rule (mangle prerouting, as keepalived's docs have
//     it) and before IPVS takes the packet at LOCAL_IN — and
//   - marks packets to NAT frontends (packet mark bit Options.MasqMark) in
//     prerouting/output and masquerades marked packets in postrouting — the
//     packets IPVS forwarded — so replies come back through the gateway.
//
// With net.ipv4.vs.conntrack=1 IPVS keeps the conntrack entry, so the
// masquerade binding applies to the whole connection (kube-proxy's ipvs
// mode does the same with iptables).
const TableName = "edgelb-ipvs"

// DefaultMasqMark is the packet-mark bit of connections to masquerade.
const DefaultMasqMark uint32 = 0x00400000

var (
	keyType4 = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	keyType6 = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetProto, nftables.TypeInetService)
)

// nftSNAT is the real snatRules.
type nftSNAT struct {
	netns int // namespace fd, 0 = the caller's
	mark  uint32
	// what the sets hold, as last programmed
	front, masq map[vsKey]bool
	// The generation gate (proxy/nftgen): the ruleset generation at
	// which the table last held front and masq exactly.
	gate    nftgen.Gate
	genConn *netlink.Conn
}

// gen reads the namespace's ruleset generation; ok is false if it cannot
// (the gate then stays shut: every resync rebuilds).
func (n *nftSNAT) gen() (uint32, bool) {
	if n.genConn == nil {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.netns})
		if err != nil {
			return 0, false
		}
		n.genConn = c
	}
	g, err := nftgen.Read(n.genConn)
	if err != nil {
		n.genConn.Close()
		n.genConn = nil
		return 0, false
	}
	return g, true
}

// flush commits c's one transaction and records it on the gate: the table
// holds what was sent afterwards if it did before (trusted) or the
// transaction rebuilt it, and nobody else committed in between. The
// generation is read right before and after, so a foreign commit at any
// point since the gate was last settled shows.
func (n *nftSNAT) flush(c *nftables.Conn, trusted bool) error {
	g0, ok := n.gen()
	if err := c.Flush(); err != nil {
		n.gate.Forget()
		return err
	}
	g1, ok1 := n.gen()
	if !ok || !ok1 {
		n.gate.Forget()
		return nil
	}
	n.gate.Settle(trusted || n.gate.CleanAt(g0), g0, g1, 1)
	return nil
}

func (n *nftSNAT) conn() (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if n.netns > 0 {
		opts = append(opts, nftables.WithNetNSFd(n.netns))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("ipvs: nftables connection: %w", err)
	}
	return c, nil
}

// setKey is the concatenated key ADDR . PROTO . PORT, each field padded to
// 4 bytes as the kernel's registers hold them.
func setKey(k vsKey) []byte {
	a := k.Addr.AsSlice()
	b := make([]byte, 0, len(a)+8)
	b = append(b, a...)
	b = append(b, byte(k.Proto), 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, k.Port)
	return append(b, 0, 0)
}

func elems(m map[vsKey]bool, v4 bool) []nftables.SetElement {
	keys := make([]vsKey, 0, len(m))
	for k, ok := range m {
		if ok && k.Mark == 0 && k.Addr.Is4() == v4 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	out := make([]nftables.SetElement, len(keys))
	for i, k := range keys {
		out[i] = nftables.SetElement{Key: setKey(k)}
	}
	return out
}

// markElems are the firewall marks of m's mark services, once each (a mark
// served in both families is one element), in host byte order as meta mark
// loads them.
func markElems(m map[vsKey]bool) []nftables.SetElement {
	var marks []uint32
	for k, ok := range m {
		if ok && k.Mark != 0 && !slices.Contains(marks, k.Mark) {
			marks = append(marks, k.Mark)
		}
	}
	slices.Sort(marks)
	out := make([]nftables.SetElement, len(marks))
	for i, mk := range marks {
		out[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(mk)}
	}
	return out
}

type tableObjs struct {
	t                            *nftables.Table
	front4, front6, masq4, masq6 *nftables.Set
	marks                        *nftables.Set // firewall marks of mark services
}

func objs() tableObjs {
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	mk := func(name string, kt nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, KeyType: kt, Concatenation: true}
	}
	return tableObjs{t: t, front4: mk("frontends4", keyType4), front6: mk("frontends6", keyType6),
		masq4: mk("masq4", keyType4), masq6: mk("masq6", keyType6),
		marks: &nftables.Set{Table: t, Name: "marks", KeyType: nftables.TypeMark}}
}

// match loads daddr . l4proto . th dport into the 32-bit registers starting
// at register 1 and looks it up in set (after checking the family).
func match(v4 bool, set *nftables.Set) []expr.Any {
	fam, off, alen, protoReg, portReg := byte(unix.NFPROTO_IPV4), uint32(16), uint32(4), uint32(9), uint32(10)
	if !v4 {
		fam, off, alen, protoReg, portReg = unix.NFPROTO_IPV6, 24, 16, 12, 13
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: alen},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
}

func (n *nftSNAT) rules(c *nftables.Conn, o tableObjs) {
	ctMark := []expr.Any{
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(proxy.CTMark)},
		&expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true},
	}
	setMark := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^n.mark), Xor: binaryutil.NativeEndian.PutUint32(n.mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true},
	}
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: o.t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.hook, Priority: nftables.ChainPriorityMangle})
		for _, r := range [][]expr.Any{
			append(match(true, o.front4), ctMark...),
			append(match(false, o.front6), ctMark...),
			append(match(true, o.masq4), setMark...),
			append(match(false, o.masq6), setMark...),
		} {
			c.AddRule(&nftables.Rule{Table: o.t, Chain: ch, Exprs: r})
		}
	}
	// Mark services: the operator's rule marks the packet in prerouting
	// (or output), at whatever priority; input and output at filter
	// priority see the mark, and run before IPVS's LOCAL_IN handler.
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"fwmark-input", nftables.ChainHookInput}, {"fwmark-output", nftables.ChainHookOutput}} {
		ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: o.t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.hook, Priority: nftables.ChainPriorityFilter})
		c.AddRule(&nftables.Rule{Table: o.t, Chain: ch, Exprs: append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Lookup{SourceRegister: 1, SetName: o.marks.Name, SetID: o.marks.ID},
		}, ctMark...)})
	}
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: o.t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: o.t, Chain: post, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(n.mark), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Counter{},
		&expr.Masq{},
	}})
}

func (n *nftSNAT) Set(front, masq map[vsKey]bool, how snatHow) (bool, error) {
	if how == snatVerify {
		if g, ok := n.gen(); !ok || !n.gate.CleanAt(g) {
			how = snatRebuild // someone committed since: the table may differ
		}
	}
	c, err := n.conn()
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	o := objs()
	if how == snatRebuild || n.front == nil {
		// One transaction: add (so the delete cannot fail), delete, rebuild.
		c.AddTable(o.t)
		c.DelTable(o.t)
		c.AddTable(o.t)
		for _, s := range []struct {
			set *nftables.Set
			el  []nftables.SetElement
		}{{o.front4, elems(front, true)}, {o.front6, elems(front, false)}, {o.masq4, elems(masq, true)}, {o.masq6, elems(masq, false)},
			{o.marks, markElems(front)}} {
			if err := c.AddSet(s.set, s.el); err != nil {
				return false, fmt.Errorf("ipvs: nftables set %s: %w", s.set.Name, err)
			}
		}
		n.rules(c, o)
		if err := n.flush(c, true); err != nil {
			return false, fmt.Errorf("ipvs: program nftables table inet %s: %w", TableName, err)
		}
		n.front, n.masq = copySet(front), copySet(masq)
		return true, nil
	}
	changed := false
	change := func(set *nftables.Set, add, del []nftables.SetElement) error {
		if len(add) > 0 {
			if err := c.SetAddElements(set, add); err != nil {
				return err
			}
			changed = true
		}
		if len(del) > 0 {
			if err := c.SetDeleteElements(set, del); err != nil {
				return err
			}
			changed = true
		}
		return nil
	}
	for _, d := range []struct {
		set      *nftables.Set
		old, cur map[vsKey]bool
		v4       bool
	}{{o.front4, n.front, front, true}, {o.front6, n.front, front, false}, {o.masq4, n.masq, masq, true}, {o.masq6, n.masq, masq, false}} {
		if err := change(d.set, elems(minus(d.cur, d.old), d.v4), elems(minus(d.old, d.cur), d.v4)); err != nil {
			return false, fmt.Errorf("ipvs: nftables set %s: %w", d.set.Name, err)
		}
	}
	// Marks by value: one mark can stand for two keys (its two families).
	curMarks, oldMarks := markElems(front), markElems(n.front)
	if err := change(o.marks, minusElems(curMarks, oldMarks), minusElems(oldMarks, curMarks)); err != nil {
		return false, fmt.Errorf("ipvs: nftables set %s: %w", o.marks.Name, err)
	}
	if !changed {
		return false, nil
	}
	if err := n.flush(c, false); err != nil {
		n.front = nil // rebuild next time
		return false, fmt.Errorf("ipvs: update nftables table inet %s: %w", TableName, err)
	}
	n.front, n.masq = copySet(front), copySet(masq)
	return false, nil
}

func (n *nftSNAT) Delete() error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	o := objs()
	c.AddTable(o.t)
	c.DelTable(o.t)
	n.front, n.masq = nil, nil
	n.gate.Forget()
	if err := c.Flush(); err != nil {
		return fmt.Errorf("ipvs: delete nftables table inet %s: %w", TableName, err)
	}
	return nil
}

func (n *nftSNAT) Close() error {
	if n.genConn != nil {
		n.genConn.Close()
		n.genConn = nil
	}
	n.gate.Forget()
	return nil
}

func minus(a, b map[vsKey]bool) map[vsKey]bool {
	out := map[vsKey]bool{}
	for k, ok := range a {
		if ok && !b[k] {
			out[k] = true
		}
	}
	return out
}

// minusElems are a's elements whose key is not in b.
func minusElems(a, b []nftables.SetElement) []nftables.SetElement {
	var out []nftables.SetElement
	for _, e := range a {
		if !slices.ContainsFunc(b, func(f nftables.SetElement) bool { return bytes.Equal(e.Key, f.Key) }) {
			out = append(out, e)
		}
	}
	return out
}

func copySet(m map[vsKey]bool) map[vsKey]bool {
	out := make(map[vsKey]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
