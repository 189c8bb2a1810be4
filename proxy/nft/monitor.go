package nft

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/proxy/nftgen"
)

// The change monitor refines the generation gate (gen.go) for gateways where
// others commit nf_tables transactions too — kube-proxy in nftables mode,
// firewalld, a host firewall reload: their commits move the generation, but
// touch only their own tables. The kernel multicasts every committed object
// (NFT_MSG_NEW*/DEL* for tables, chains, rules, sets, elements) to the
// NFNLGRP_NFTABLES group, followed by NFT_MSG_NEWGEN with the transaction's
// generation. The monitor notes, per generation, whether a transaction
// touched edgelb's tables from a socket other than the dataplane's own; a
// resync whose generation moved only through transactions that did not is
// as idle as one whose generation did not move.
//
// Whatever the monitor cannot vouch for sends the resync back to a full
// read: notifications lost (ENOBUFS — a burst bigger than the socket buffer,
// such as the 120,000 element notifications of a cold sync), a generation it
// has not seen yet, a read error.
type monitor struct {
	conn   *netlink.Conn
	gen    func() (uint32, error) // GETGEN on a socket of the monitor's own
	table  string
	portid func() uint32 // the dataplane socket's netlink port id (changes on redial)

	mu      sync.Mutex
	lastGen uint32 // the last NEWGEN seen
	seen    bool   // lastGen is set
	broken  bool   // the monitor cannot vouch for anything any more
	touched bool   // the transaction in progress touched edgelb's tables from elsewhere
	// cur is what the transaction in progress touched of edgelb's tables
	// from elsewhere; scopes what each such committed transaction touched,
	// newest last, at most maxScopes (scopeFloor: every foreign transaction
	// after it is in scopes).
	cur        scope
	scopes     []scope
	scopeFloor uint32
	// losses are generation ranges (lo, hi] whose notifications may have
	// been dropped: from the last generation seen when the loss was noticed
	// to the kernel's generation right after (nothing dropped can be newer).
	losses [][2]uint32
	closed atomic.Bool
	done   chan struct{}
}

func newMonitor(netns int, table string, portid func() uint32) (*monitor, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netns, Groups: 1 << (unix.NFNLGRP_NFTABLES - 1)})
	if err != nil {
		return nil, err
	}
	gc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netns})
	if err != nil {
		c.Close()
		return nil, err
	}
	// A large buffer makes loss (and so a needless full read) rarer; loss is
	// still handled.
	_ = c.SetReadBuffer(4 << 20)
	m := &monitor{conn: c, table: table, portid: portid, done: make(chan struct{}),
		gen: func() (uint32, error) { return nftgen.Read(gc) }}
	go func() {
		m.run()
		gc.Close()
	}()
	return m, nil
}

func (m *monitor) close() {
	if m.closed.Swap(true) {
		return
	}
	m.conn.Close()
	<-m.done
}

func (m *monitor) run() {
	defer close(m.done)
	for {
		msgs, err := m.conn.Receive()
		if m.closed.Load() {
			return
		}
		if err != nil {
			// ENOBUFS: notifications were dropped. Anything else: the
			// monitor no longer knows what it misses.
			m.lose(errors.Is(err, unix.ENOBUFS))
			if !errors.Is(err, unix.ENOBUFS) {
				return
			}
			continue
		}
		for _, msg := range msgs {
			m.handle(msg)
		}
	}
}

// lose records dropped notifications: the kernel reports the drop on the
// next receive, before what is still queued, so whatever was dropped is
// newer than the last generation handled and not newer than the kernel's
// generation now.
func (m *monitor) lose(recoverable bool) {
	hi, err := m.gen()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touched = true // the transaction in progress, if any, counts as touched
	if !recoverable || err != nil || !m.seen {
		m.broken = true
		return
	}
	m.losses = append(m.losses, [2]uint32{m.lastGen, hi})
	if len(m.losses) > 16 { // merge the oldest: bounded, and still covering
		m.losses[1][0] = m.losses[0][0]
		m.losses = m.losses[1:]
	}
}

func (m *monitor) handle(msg netlink.Message) {
	typ := uint16(msg.Header.Type)
	if typ>>8 != unix.NFNL_SUBSYS_NFTABLES {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if typ&0xff == unix.NFT_MSG_NEWGEN {
		if g, ok := nftgen.Decode(msg.Data); ok {
			if m.touched {
				m.cur.gen = g
				if len(m.scopes) == maxScopes {
					m.scopeFloor = m.scopes[0].gen
					m.scopes = m.scopes[1:]
				}
				m.scopes = append(m.scopes, m.cur)
			}
			m.touched, m.cur = false, scope{}
			m.lastGen, m.seen = g, true
		}
		return
	}
	if msg.Header.PID == m.portid() || (m.touched && m.cur.structural) {
		return
	}
	if m.isOurs(msg) {
		m.touched = true
		m.cur.add(msg)
	}
}

// maxScopes bounds the foreign transactions remembered; older ones are
// known only as "something": a full read.
const maxScopes = 64

// scope is what one foreign transaction did to edgelb's tables: elements
// added to or deleted from the named sets only, or anything else
// (structural: tables, chains, rules, sets themselves).
type scope struct {
	gen        uint32
	sets       map[setName]bool
	structural bool
}

// setName is a set of edgelb's table in one family.
type setName struct {
	v6   bool
	name string
}

func (sc *scope) add(msg netlink.Message) {
	switch uint16(msg.Header.Type) & 0xff {
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
	default:
		sc.structural = true
		return
	}
	name := ""
	if ad, err := netlink.NewAttributeDecoder(msg.Data[4:]); err == nil {
		for ad.Next() {
			if ad.Type() == unix.NFTA_SET_ELEM_LIST_SET {
				name = ad.String()
			}
		}
	}
	if name == "" {
		sc.structural = true // cannot tell which set: read everything
		return
	}
	if sc.sets == nil {
		sc.sets = map[setName]bool{}
	}
	sc.sets[setName{v6: msg.Data[0] == unix.NFPROTO_IPV6, name: name}] = true
}

// behind reports whether the monitor has not yet handled generation g.
func (m *monitor) behind(g uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.seen || m.lastGen < g
}

// elementsOnly reports, when every transaction in (from, to] that touched
// edgelb's tables from elsewhere only added or deleted elements (and the
// monitor saw them all), the sets they touched.
func (m *monitor) elementsOnly(from, to uint32) (map[setName]bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken || !m.seen || m.lastGen != to || from < m.scopeFloor {
		return nil, false
	}
	for _, l := range m.losses {
		if l[0] < to && from < l[1] {
			return nil, false
		}
	}
	out := map[setName]bool{}
	for _, sc := range m.scopes {
		if sc.gen <= from || sc.gen > to {
			continue
		}
		if sc.structural {
			return nil, false
		}
		for k := range sc.sets {
			out[k] = true
		}
	}
	return out, true
}

// isOurs: the notification names edgelb's table in the ip or ip6 family. Its
// table name is attribute 1 in every object kind (NFTA_TABLE_NAME,
// NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE).
func (m *monitor) isOurs(msg netlink.Message) bool {
	if len(msg.Data) < 4 {
		return true // cannot tell: assume so
	}
	if fam := msg.Data[0]; fam != unix.NFPROTO_IPV4 && fam != unix.NFPROTO_IPV6 {
		return false
	}
	ad, err := netlink.NewAttributeDecoder(msg.Data[4:])
	if err != nil {
		return true
	}
	for ad.Next() {
		if ad.Type() == 1 {
			return ad.String() == m.table
		}
	}
	return true
}

// quietWait is quiet, giving the monitor up to 50 ms to handle a
// transaction committed just before the caller read the generation.
func (m *monitor) quietWait(from, to uint32) bool {
	m.await(to)
	q, _ := m.quiet(from, to)
	return q
}

// await gives the monitor up to 50 ms to handle generation g (a
// transaction committed just before the caller read it).
func (m *monitor) await(g uint32) {
	for i := 0; i < 10 && m.behind(g); i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// quiet reports whether every transaction after generation from up to and
// including to left edgelb's tables alone, as far as the monitor saw: it has
// handled generation to, and neither a foreign touch nor a possible loss
// falls in (from, to].
func (m *monitor) quiet(from, to uint32) (quiet, behind bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken {
		return false, false
	}
	if !m.seen || m.lastGen < to {
		return false, true
	}
	if m.lastGen != to {
		return false, false // newer transactions already: the caller reads again next time
	}
	// Generations start at 1 in a new namespace and would take 4 billion
	// commits to wrap: plain comparisons.
	// The newest foreign transaction (lastGen == to: none is newer than to).
	if n := len(m.scopes); n > 0 && from < m.scopes[n-1].gen {
		return false, false
	}
	for _, l := range m.losses {
		if l[0] < to && from < l[1] { // (l[0], l[1]] meets (from, to]
			return false, false
		}
	}
	return true, false
}
