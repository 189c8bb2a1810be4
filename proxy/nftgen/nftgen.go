// Package nftgen is the nf_tables ruleset generation and the gate the
// dataplanes keep on it: a leaf that proxy/nft and proxy/ipvs share.
package nftgen

import (
	"encoding/binary"
	"fmt"

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

// Gate is the generation at which a writer's nftables objects last
// equalled its model, established only by the counting above. The nft
// dataplane keeps one for its tables (proxy/nft, gen.go); the IPVS dataplane
// one for its own table (proxy/ipvs, snat.go).
type Gate struct {
	valid bool
	gen   uint32
}

// Clean returns the generation at which the objects equal the model, and
// whether that is known at all.
func (g Gate) Clean() (uint32, bool) { return g.gen, g.valid }

// CleanAt reports whether the objects are known to equal the model at
// generation gen.
func (g Gate) CleanAt(gen uint32) bool { return g.valid && g.gen == gen }

// Forget: no longer known (a write failed, the model was reset).
func (g *Gate) Forget() { g.valid = false }

// Advance moves a known clean generation to gen: the commits in between were
// seen to leave the objects alone.
func (g *Gate) Advance(gen uint32) {
	if g.valid {
		g.gen = gen
	}
}

// Settle records a write that started at generation before (read just
// before it), committed commits transactions, and left the generation at
// after: the objects equal the model at after if and only if they did before
// the write — trusted: CleanAt(before), or the write read or rebuilt them
// whole — and nobody else committed meanwhile (after == before + commits).
func (g *Gate) Settle(trusted bool, before, after, commits uint32) {
	*g = Gate{valid: trusted && after == before+commits, gen: after}
}

var getGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)

// Read asks the kernel for the ruleset generation (NFT_MSG_GETGEN) over
// c, a NETLINK_NETFILTER connection in the namespace of interest. The IPVS
// dataplane gates the rebuild of its own nftables table on it.
func Read(c *netlink.Conn) (uint32, error) {
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
		if g, ok := Decode(m.Data); ok {
			return g, nil
		}
	}
	return 0, fmt.Errorf("nft: the kernel's answer to GETGEN carried no generation")
}

// Decode reads NFTA_GEN_ID from a NEWGEN message's payload (an answer to
// GETGEN, or a ruleset notification).
func Decode(data []byte) (uint32, bool) {
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
