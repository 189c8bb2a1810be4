package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables"

	"github.com/edgelb/edgelb/proxy/nftgen"
)

// The generation gate (proxy/nftgen: what keeps an idle gateway idle) as
// the nft dataplane keeps it for its tables.

// DefaultFullEvery is how many resyncs pass between unconditional full
// read-backs: with the daemon's default 30 s interval, one an hour. Every
// change to edgelb's tables is a commit the gate sees, so this net guards
// against a mistake in that reasoning, not against drift; and a full read of
// 10,000 services × 10 backends costs ~2.5 s of CPU (BenchmarkNetnsResyncFull10000:
// the kernel restarts its set walk for every 32 KiB dump message), which an
// idle gateway should not pay every few minutes.
const DefaultFullEvery = 120

// genID reads the ruleset generation of the dataplane's namespace.
func (d *Dataplane) genID() (uint32, error) {
	if d.genConn == nil {
		return 0, fmt.Errorf("nft: generation: no netlink connection")
	}
	return nftgen.Read(d.genConn)
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
