package nft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Batches: how writes become netlink transactions.
//
// google/nftables asks the kernel to acknowledge every message of a batch
// (NLM_F_ACK) and reads the acknowledgements only after sending the whole
// batch; the kernel queues them at the end of the transaction without
// waiting (MSG_DONTWAIT). Each costs ackCost of the socket's receive buffer,
// and the ones that do not fit are dropped: recvmsg then fails with ENOBUFS
// although the transaction was processed. So a batch is bounded twice: by
// bytes (what the send buffer takes, Dataplane.budget) and by messages (what
// the receive buffer holds acknowledgements for, Dataplane.maxMsgs).

// ackCost bounds what one acknowledgement occupies in the receive buffer
// (the skb's truesize). Measured: 768 bytes on Debian's 6.1, 832 on 6.18
// (277 and 256 acks fit the default 212,992 bytes); rounded up for margin.
const ackCost = 1024

// maxMsgElems keeps one element message well below the 64 KiB a netlink
// attribute can hold.
const maxMsgElems = 400

// op queues a structural change (table, set, chain, rules): msgs is how many
// netlink messages it queues.
type op struct {
	msgs  int
	queue func(c *nftables.Conn) error
}

// batch is one transaction's elements, with structural changes that go
// before (pre) and after (post) them — in the same transaction when every
// acknowledgement fits the receive buffer, else in transactions of their own.
type batch struct {
	pre      []op // structure first (tables, sets, chains, rules)
	del, add []elem
	post     []op // chain deletions last
	bytes    int
	msgs     msgCount
}

// msgCount counts the element messages writeElems will send: one per
// maxMsgElems elements of each (family, set, delete/add) group, which
// sortedElems makes contiguous.
type msgCount struct {
	n    [2][2][numSets]int
	msgs int
}

func (m *msgCount) add(es []elem, del bool) {
	d := 0
	if del {
		d = 1
	}
	for _, e := range es {
		f := 0
		if e.v6 {
			f = 1
		}
		g := &m.n[f][d][setIndex(e.set)]
		if *g%maxMsgElems == 0 {
			m.msgs++
		}
		*g++
	}
}

const numSets = 7

func setIndex(set string) int {
	switch set {
	case setVIP:
		return 0
	case setNP:
		return 1
	case setNodes:
		return 2
	case setDispatch:
		return 3
	case setBE:
		return 4
	case setPost:
		return 5
	}
	return 6 // setAff
}

// unit is a group of element writes that must land in the same batch (one
// service's).
type unit struct{ del, add []elem }

// pack groups units into batches of at most budget bytes and maxMsgs
// element messages, each unit whole (a unit larger than that alone gets a
// batch of its own). It finds the boundaries first and then copies each
// batch's elements once into slices of their final size: appending unit
// by unit grew them by doubling, ~50 MB of garbage for a cold sync of
// 121,000 elements.
//
// A batch's elements alias the units' own array when the units' elements
// follow one another in it (elemDiff's do: a cold sync's 110,000 elements
// at 10,000 services are not copied again); batches are only read after.
func pack(units []unit, budget, maxMsgs int) []*batch {
	var out []*batch
	emit := func(us []unit, bytes int) {
		b := &batch{bytes: bytes}
		for _, u := range us {
			b.msgs.add(u.del, true)
			b.msgs.add(u.add, false)
		}
		b.del = joined(us, func(u unit) []elem { return u.del })
		b.add = joined(us, func(u unit) []elem { return u.add })
		out = append(out, b)
	}
	from, bytes := 0, 0
	var msgs msgCount
	for i, u := range units {
		n := 0
		for _, e := range u.del {
			n += e.size()
		}
		for _, e := range u.add {
			n += e.size()
		}
		msgs.add(u.del, true)
		msgs.add(u.add, false)
		if bytes > 0 && (bytes+n > budget || msgs.msgs > maxMsgs) {
			// Full: the batch ends before u; u starts the next.
			emit(units[from:i], bytes)
			from, bytes, msgs = i, 0, msgCount{}
			msgs.add(u.del, true)
			msgs.add(u.add, false)
		}
		bytes += n
	}
	emit(units[from:], bytes)
	return out
}

// joined is the elements get picks from each of us, in order: a range of
// their array when each unit's follow the previous unit's in it, else a
// copy of its final size.
func joined(us []unit, get func(unit) []elem) []elem {
	var run []elem
	n := 0
	contiguous := true
	for _, u := range us {
		es := get(u)
		if len(es) == 0 {
			continue
		}
		n += len(es)
		switch {
		case run == nil:
			run = es
		case contiguous && cap(run)-len(run) >= len(es) && &run[:len(run)+1][len(run)] == &es[0]:
			run = run[:len(run)+len(es)]
		default:
			contiguous = false
		}
	}
	if contiguous {
		return run[:len(run):len(run)] // capped: an append must never write into the array
	}
	out := make([]elem, 0, n)
	for _, u := range us {
		out = append(out, get(u)...)
	}
	return out
}

// sortedElems puts writes in order: by rank (see rank; reversed for adds),
// then grouped by table and set so each message carries many elements.
// Within a group the order is kept (stable).
//
// There are at most 2×numSets groups, so it distributes the elements into
// them (O(n)) instead of a stable comparison sort: at 100,000 elements that
// sort (insertion sort and symmerge, O(n log² n) moves of 88-byte elements)
// was a tenth of a cold sync's CPU.
//
// It returns es itself when already in order, else a new slice (es is
// left as it was: a batch's elements may alias another's, pack).
func sortedElems(es []elem, adds bool) []elem {
	cmp := elemOrder(adds)
	if len(es) == 0 || slices.IsSortedFunc(es, cmp) {
		return es
	}
	var count [numGroups]int
	var first [numGroups]int // an element of each group, for ordering them
	for i := range es {
		g := groupOf(&es[i])
		if count[g] == 0 {
			first[g] = i
		}
		count[g]++
	}
	order := make([]int, 0, numGroups)
	for g := range count {
		if count[g] > 0 {
			order = append(order, g)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp(es[first[a]], es[first[b]]) })
	var start [numGroups]int
	at := 0
	for _, g := range order {
		start[g] = at
		at += count[g]
	}
	out := make([]elem, len(es))
	for i := range es {
		g := groupOf(&es[i])
		out[start[g]] = es[i]
		start[g]++
	}
	if count[otherGroup] > 0 {
		slices.SortStableFunc(out, cmp)
	}
	return out
}

// Group g holds family g/numSets, set setIndex == g%numSets; otherGroup
// the set names edgelb does not use (never its own sets), which a
// comparison sort orders afterwards.
const (
	otherGroup = 2 * numSets
	numGroups  = otherGroup + 1
)

func groupOf(e *elem) int {
	k := setIndex(e.set)
	if k == setIndex(setAff) && e.set != setAff {
		return otherGroup // setIndex's default
	}
	if e.v6 {
		k += numSets
	}
	return k
}

// elemGroups gathers elements into sortedElems' groups as they are made, so
// a cold sync's 110,000 adds (10,000 services) need neither a sort nor a
// second array: each group is already in the order it was filled.
type elemGroups [numGroups][]elem

func (g *elemGroups) add(e elem) {
	k := groupOf(&e)
	g[k] = append(g[k], e)
}

// ordered returns the non-empty groups in elemOrder(adds): together what
// sortedElems makes of all the elements in the order they were added.
func (g *elemGroups) ordered(adds bool) [][]elem {
	if len(g[otherGroup]) > 0 {
		// Names edgelb does not use may sort between its own: one sort.
		var all []elem
		for _, es := range g {
			all = append(all, es...)
		}
		return [][]elem{sortedElems(all, adds)}
	}
	cmp := elemOrder(adds)
	var out [][]elem
	for _, es := range g {
		if len(es) > 0 {
			out = append(out, es)
		}
	}
	slices.SortStableFunc(out, func(a, b []elem) int { return cmp(a[0], b[0]) })
	return out
}

// elemOrder is sortedElems' order: rank (reversed for adds), family, set.
func elemOrder(adds bool) func(x, y elem) int {
	return func(x, y elem) int {
		r := rank(x.set) - rank(y.set)
		if adds {
			r = -r
		}
		if r != 0 {
			return r
		}
		if x.v6 != y.v6 {
			if x.v6 {
				return 1
			}
			return -1
		}
		return strings.Compare(x.set, y.set)
	}
}

func (d *Dataplane) setRef(v6 bool, name string) *nftables.Set {
	return &nftables.Set{Table: d.tableOf(v6), Name: name}
}

func (d *Dataplane) tableOf(v6 bool) *nftables.Table {
	if v6 {
		return d.tables[1]
	}
	return d.tables[0]
}

// writeElems queues element messages, grouped by table and set, in chunks.
func (d *Dataplane) writeElems(c *nftables.Conn, es []elem, del bool) (int, error) {
	msgs := 0
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].set == es[i].set && es[j].v6 == es[i].v6 && j-i < maxMsgElems {
			j++
		}
		vals := make([]nftables.SetElement, 0, j-i)
		for _, e := range es[i:j] {
			se := nftables.SetElement{Key: e.key, Val: e.val}
			if (e.set == setDispatch || e.set == setPost) && !del {
				se.VerdictData = &expr.Verdict{Kind: expr.VerdictGoto, Chain: e.chain}
			}
			vals = append(vals, se)
		}
		set := d.setRef(es[i].v6, es[i].set)
		var err error
		if del {
			err = c.SetDeleteElements(set, vals)
		} else {
			err = c.SetAddElements(set, vals)
		}
		if err != nil {
			return msgs, fmt.Errorf("nft: encode elements of %s: %w", es[i].set, err)
		}
		msgs++
		i = j
	}
	return msgs, nil
}

// flush sends the batches in order.
func (d *Dataplane) flush(ctx context.Context, bs []*batch) error {
	for i, b := range bs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nft: after %d of %d batches: %w", i, len(bs), err)
		}
		if len(b.pre) == 0 && len(b.del) == 0 && len(b.add) == 0 && len(b.post) == 0 {
			continue
		}
		if err := d.flushBatch(b, i, len(bs)); err != nil {
			return err
		}
	}
	return nil
}

// flushBatch sends one batch: its elements in one transaction; structural
// ops join it as long as every acknowledgement fits the receive buffer, the
// rest go in transactions of their own before (pre) or after (post) it.
func (d *Dataplane) flushBatch(b *batch, i, n int) error {
	c := d.conn
	msgs, dels, adds := 0, 0, 0
	send := func() error {
		if msgs == 0 {
			return nil
		}
		err := d.sent(c.Flush(), i, n, msgs, dels, adds)
		msgs, dels, adds = 0, 0, 0
		return err
	}
	// room sends what is queued when k more messages would not fit.
	room := func(k int) error {
		if msgs > 0 && msgs+k > d.maxMsgs {
			return send()
		}
		return nil
	}
	for _, o := range b.pre {
		if err := room(o.msgs + b.msgs.msgs); err != nil {
			return err
		}
		if err := o.queue(c); err != nil {
			d.redial()
			return err
		}
		msgs += o.msgs
	}
	if err := room(b.msgs.msgs); err != nil {
		return err
	}
	// Not in place: a batch's elements may alias other batches' (pack).
	del, add := sortedElems(b.del, false), sortedElems(b.add, true)
	k, err := d.writeElems(c, del, true)
	msgs += k
	if err == nil {
		k, err = d.writeElems(c, add, false)
		msgs += k
	}
	if err != nil {
		d.redial()
		return err
	}
	dels, adds = len(b.del), len(b.add)
	for _, o := range b.post {
		if err := room(o.msgs); err != nil {
			return err
		}
		if err := o.queue(c); err != nil {
			d.redial()
			return err
		}
		msgs += o.msgs
	}
	return send()
}

// sent records a transaction that was sent (either way) and its outcome:
// the statistics, the generation moving by one when it was taken
// (gen.go), a fresh socket and a wrapped error when not.
func (d *Dataplane) sent(err error, i, n, msgs, dels, adds int) error {
	d.stats.Batches++
	d.stats.Messages += uint64(msgs)
	d.stats.Elements += uint64(dels + adds)
	d.stats.MaxMessages = max(d.stats.MaxMessages, uint64(msgs))
	if err != nil {
		d.redial()
		return d.batchErr(err, fmt.Sprintf("nft: batch %d of %d (%d messages, %d deletes, %d adds)", i+1, n, msgs, dels, adds))
	}
	d.commits++
	return nil
}

// batchErr wraps a failed transaction's error; a lost acknowledgement
// (ENOBUFS) says so, since the kernel may well have applied it.
func (d *Dataplane) batchErr(err error, what string) error {
	if errors.Is(err, unix.ENOBUFS) {
		what += fmt.Sprintf(": acknowledgements overflowed the %d-byte receive buffer (the transaction may have been applied)", d.rcvbuf)
	}
	return kernelErr(what, err)
}

// recoverLostAcks turns a failure that only lost acknowledgements (ENOBUFS:
// the kernel processed the transaction but dropped acks that did not fit the
// receive buffer) into a read-back and repair, so Apply does not report a
// change that happened as failed. Other errors pass through.
func (d *Dataplane) recoverLostAcks(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, unix.ENOBUFS) {
		return err
	}
	d.opts.Log.Warn("nft: acknowledgements lost; reading the kernel back", "err", err)
	snap, rerr := d.read()
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if serr := d.fullSync(ctx, snap); serr != nil {
		return errors.Join(err, serr)
	}
	return nil
}
