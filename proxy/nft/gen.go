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

// genGate is the generation at which the kernel last equalled the model.
type genGate struct {
	valid bool
	gen   uint32
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
// has, if and only if the generation moved by exactly our own commits since
// genBefore: nobody else committed meanwhile.
func (d *Dataplane) settle(g0 uint32, commits0 uint64, ok bool) {
	d.clean.valid = false
	if !ok {
		return
	}
	g1, err := d.genID()
	if err != nil {
		return
	}
	if g1 == g0+uint32(d.commits-commits0) {
		d.clean = genGate{valid: true, gen: g1}
	}
}

// unchanged reports whether the kernel still equals the model without
// reading it: the generation is still the clean one, or it moved only
// through transactions that the monitor saw leave edgelb's tables alone
// (then the clean generation moves along).
func (d *Dataplane) unchanged() bool {
	if !d.clean.valid {
		return false
	}
	g, err := d.genID()
	if err != nil {
		return false
	}
	if g == d.clean.gen {
		return true
	}
	if d.mon != nil && d.mon.quietWait(d.clean.gen, g) {
		d.clean.gen = g
		d.stats.GatedForeign++
		return true
	}
	return false
}

// elementsOnly: the kernel differs from the model only by elements others
// added to or deleted from the returned sets (of edgelb's static sets), as
// the monitor saw every transaction since the clean generation.
func (d *Dataplane) elementsOnly() (map[setName]bool, bool) {
	if !d.clean.valid || d.mon == nil {
		return nil, false
	}
	g, err := d.genID()
	if err != nil {
		return nil, false
	}
	d.mon.await(g)
	return d.mon.elementsOnly(d.clean.gen, g)
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
