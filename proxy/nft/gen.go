package nft

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The generation gate: what keeps an idle gateway idle.
//
// The kernel numbers nf_tables rulesets: every committed transaction in a
// network namespace — edgelb's or anyone's, in any table — adds one to the
// generation (net->nft.base_seq), and NFT_MSG_GETGEN reads it in one round
// trip. So when the generation is what it was the last time the kernel was
// known to equal the model, nothing can have changed, and a resync need not
// read 120,000 elements back to learn that.
//
// "Known to equal the model" (clean) is established only by counting: around
// a write of ours, the generation must have moved by exactly the number of
// transactions we committed; around a full read-back and repair, likewise. A
// foreign commit in between (nft by hand, another daemon's table) makes the
// count disagree, and the next resync reads everything. A foreign commit that
// touches only other tables also costs one full read — the price of not
// parsing every ruleset notification in the namespace. Every FullEvery-th
// resync reads back in full regardless: a safety net that does not depend on
// this reasoning being right.

// GenGate is the generation at which a writer's nftables objects last
// equalled its model, established only by the counting above. The nft
// dataplane keeps one for its tables; the IPVS dataplane one for its own
// table (proxy/ipvs, snat.go).
type GenGate struct {
	valid bool
	gen   uint32
}

// Clean returns the generation at which the objects equal the model, and
// whether that is known at all.
func (g GenGate) Clean() (uint32, bool) { return g.gen, g.valid }

// CleanAt reports whether the objects are known to equal the model at
// generation gen.
func (g GenGate) CleanAt(gen uint32) bool { return g.valid && g.gen == gen }

// Forget: no longer known (a write failed, the model was reset).
func (g *GenGate) Forget() { g.valid = false }

// Advance moves a known clean generation to gen: the commits in between were
// seen to leave the objects alone.
func (g *GenGate) Advance(gen uint32) {
	if g.valid {
		g.gen = gen
	}
}

// Settle records a write that started at generation before (read just
// before it), committed commits transactions, and left the generation at
// after: the objects equal the model at after if and only if they did before
// the write — trusted: CleanAt(before), or the write read or rebuilt them
// whole — and nobody else committed meanwhile (after == before + commits).
func (g *GenGate) Settle(trusted bool, before, after, commits uint32) {
	*g = GenGate{valid: trusted && after == before+commits, gen: after}
}

// DefaultFullEvery is how many resyncs pass between unconditional full
// read-backs: with the daemon's default 30 s interval, one an hour. Every
// change to edgelb's tables is a commit the gate sees, so this net guards
// against a mistake in that reasoning, not against drift; and a full read of
// 10,000 services × 10 backends costs ~2.5 s of CPU (BenchmarkNetnsResyncFull10000:
// the kernel restarts its set walk for every 32 KiB dump message), which an
// idle gateway should not pay every few minutes.
const DefaultFullEvery = 120

var getGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)

// genID reads the ruleset generation of the dataplane's namespace.
func (d *Dataplane) genID() (uint32, error) {
	if d.genConn == nil {
		return 0, fmt.Errorf("nft: generation: no netlink connection")
	}
	return Generation(d.genConn)
}

// Generation asks the kernel for the ruleset generation (NFT_MSG_GETGEN) over
// c, a NETLINK_NETFILTER connection in the namespace of interest. The IPVS
// dataplane gates the rebuild of its own nftables table on it.
func Generation(c *netlink.Conn) (uint32, error) {
	// nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0.
	req := netlink.Message{
		Header: netlink.Header{Type: getGenType, Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	msgs, err := c.Execute(req)
	if err != nil {
		return 0, fmt.Errorf("nft: read the ruleset generation: %w", err)
	}
	for _, m := range msgs {
		if g, ok := genOf(m.Data); ok {
			return g, nil
		}
	}
	return 0, fmt.Errorf("nft: the kernel's answer to GETGEN carried no generation")
}

// genOf decodes NFTA_GEN_ID from a NEWGEN message's payload.
func genOf(data []byte) (uint32, bool) {
	if len(data) < 4 {
		return 0, false
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return 0, false
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID {
			return ad.Uint32(), true
		}
	}
	return 0, false
}

// genBefore reads the generation before a write or read-back; ok is false
// when it cannot be read (the gate then stays shut: full resyncs).
func (d *Dataplane) genBefore() (gen uint32, commits uint64, ok bool) {
	g, err := d.genID()
	if err != nil {
		d.opts.Log.Debug("nft: generation", "err", err)
		return 0, d.commits, false
	}
	return g, d.commits, true
}

// settle records the kernel as equal to the model at the generation it now
// has, if and only if it was before the write (trusted) and the generation
// moved by exactly our own commits since genBefore: nobody else committed
// meanwhile.
func (d *Dataplane) settle(trusted bool, g0 uint32, commits0 uint64, ok bool) {
	d.clean.Forget()
	if !ok {
		return
	}
	g1, err := d.genID()
	if err != nil {
		return
	}
	d.clean.Settle(trusted, g0, g1, uint32(d.commits-commits0))
}

// unchanged reports whether the kernel still equals the model without
// reading it: the generation is still the clean one, or it moved only
// through transactions that the monitor saw leave edgelb's tables alone
// (then the clean generation moves along).
func (d *Dataplane) unchanged() bool {
	clean, ok := d.clean.Clean()
	if !ok {
		return false
	}
	g, err := d.genID()
	if err != nil {
		return false
	}
	if g == clean {
		return true
	}
	if d.mon != nil && d.mon.quietWait(clean, g) {
		d.clean.Advance(g)
		d.stats.GatedForeign++
		return true
	}
	return false
}

// elementsOnly: the kernel differs from the model only by elements others
// added to or deleted from the returned sets (of edgelb's static sets), as
// the monitor saw every transaction since the clean generation.
func (d *Dataplane) elementsOnly() (map[setName]bool, bool) {
	clean, ok := d.clean.Clean()
	if !ok || d.mon == nil {
		return nil, false
	}
	g, err := d.genID()
	if err != nil {
		return nil, false
	}
	d.mon.await(g)
	return d.mon.elementsOnly(clean, g)
}

// Present reports which of edgelb's nftables tables exist in the network
// namespace netns (0: the caller's own): tables named name in any family
// (the nft dataplane's ip/ip6 "edgelb", the IPVS dataplane's
// "edgelb-ipvs"). The daemon asks before it takes a missing state file for
// a first start.
func Present(netns int, names ...string) ([]string, error) {
	opts := []nftables.ConnOption{}
	if netns != 0 {
		opts = append(opts, nftables.WithNetNSFd(netns))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, kernelErr("nft: open netlink", err)
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return nil, kernelErr("nft: list tables", err)
	}
	var out []string
	for _, t := range tables {
		if slices.Contains(names, t.Name) {
			fam := map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6",
				nftables.TableFamilyINet: "inet"}[t.Family]
			out = append(out, fmt.Sprintf("table %s %s", fam, t.Name))
		}
	}
	return out, nil
}
