package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Reading the kernel back: both tables whole (read, for a full resync and
// the first sync) or only some sets' elements (readSets, for the repairs the
// change monitor scopes), into a snapshot that elemDiff and syncStructure
// compare with the model.

// tableSnap is one table as read back from the kernel.
type tableSnap struct {
	exists bool
	chains map[string]bool
	rules  map[string][]*nftables.Rule
	sets   map[string]bool
	elems  map[string]map[string]string // set → key → value (see elem.value)
}

// snapshot is both tables.
type snapshot [2]*tableSnap

func (s *snapshot) of(v6 bool) *tableSnap {
	if v6 {
		return s[1]
	}
	return s[0]
}

// empty reports whether neither table holds an element.
func (s *snapshot) empty() bool {
	for _, t := range s {
		if t == nil {
			continue
		}
		for _, es := range t.elems {
			if len(es) > 0 {
				return false
			}
		}
	}
	return true
}

// staticSets are the sets whose elements the model fully decides (the
// affinity map is filled by the packet path).
var staticSets = []string{setVIP, setNP, setNodes, setDispatch, setPost, setBE}

// read dumps both tables over netlink.
func (d *Dataplane) read() (*snapshot, error) {
	d.stats.Reads++
	var snap snapshot
	for i, f := range d.fams {
		ts, err := d.readTable(f)
		if err != nil {
			return nil, err
		}
		snap[i] = ts
	}
	return &snap, nil
}

func (d *Dataplane) readTable(f fam) (*tableSnap, error) {
	s := &tableSnap{chains: map[string]bool{}, rules: map[string][]*nftables.Rule{}, sets: map[string]bool{},
		elems: map[string]map[string]string{}}
	t := d.tableOf(f.v6)
	tables, err := d.conn.ListTablesOfFamily(f.family)
	if err != nil {
		return nil, kernelErr("nft: list tables", err)
	}
	for _, kt := range tables {
		s.exists = s.exists || kt.Name == t.Name
	}
	if !s.exists {
		return s, nil
	}
	chains, err := d.conn.ListChainsOfTableFamily(f.family)
	if err != nil {
		return nil, fmt.Errorf("nft: list %s chains: %w", f, err)
	}
	for _, c := range chains {
		if c.Table.Name != t.Name {
			continue
		}
		s.chains[c.Name] = true
		rules, err := d.conn.GetRules(t, c)
		if err != nil {
			return nil, fmt.Errorf("nft: list rules of %s %s: %w", f, c.Name, err)
		}
		s.rules[c.Name] = rules
	}
	sets, err := d.conn.GetSets(t)
	if err != nil {
		return nil, fmt.Errorf("nft: list %s sets: %w", f, err)
	}
	for _, set := range sets {
		s.sets[set.Name] = true
	}
	for _, name := range staticSets {
		if !s.sets[name] {
			continue
		}
		m, err := d.readElems(f, name)
		if err != nil {
			return nil, err
		}
		s.elems[name] = m
	}
	return s, nil
}

// readElems dumps one static set's elements: key → value (see elem.value).
func (d *Dataplane) readElems(f fam, name string) (map[string]string, error) {
	els, err := d.conn.GetSetElements(d.setRef(f.v6, name))
	if err != nil {
		return nil, fmt.Errorf("nft: list elements of %s %s: %w", f, name, err)
	}
	m := make(map[string]string, len(els))
	for _, e := range els {
		v := string(e.Val)
		if name == setDispatch || name == setPost {
			v = decodeVerdict(e.Val)
		}
		m[string(e.Key)] = v
	}
	return m, nil
}

// decodeVerdict renders a vmap element's data (the nested NFTA_VERDICT_*
// attributes) like elem.value.
func decodeVerdict(b []byte) string {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return "?"
	}
	ad.ByteOrder = binary.BigEndian
	var code int32
	var chain string
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			code = int32(ad.Uint32())
		case unix.NFTA_VERDICT_CHAIN:
			chain = ad.String()
		}
	}
	if code == unix.NFT_GOTO {
		return "goto:" + chain
	}
	return fmt.Sprintf("verdict:%d:%s", code, chain)
}

// readSets dumps only the elements of the given static sets.
func (d *Dataplane) readSets(sets map[setName]bool) (*snapshot, error) {
	d.stats.PartialReads++
	var snap snapshot
	for i, f := range d.fams {
		ts := &tableSnap{exists: true, elems: map[string]map[string]string{}}
		for _, name := range staticSets {
			if !sets[setName{f.v6, name}] {
				continue
			}
			m, err := d.readElems(f, name)
			if err != nil {
				return nil, err
			}
			ts.elems[name] = m
		}
		snap[i] = ts
	}
	return &snap, nil
}
