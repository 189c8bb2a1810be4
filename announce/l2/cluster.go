package l2

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// startCluster creates the memberlist node and starts joining in the background.
func (a *Announcer) startCluster() error {
	m := a.cfg.Members
	t := m.Tuning.withDefaults()
	mc := memberlist.DefaultLANConfig()
	mc.Name = m.Name
	bind := m.Bind
	if !bind.IsValid() {
		bind = netip.AddrPortFrom(netip.IPv4Unspecified(), DefaultPort)
	}
	if bind.Port() == 0 {
		bind = netip.AddrPortFrom(bind.Addr(), DefaultPort)
	}
	mc.BindAddr, mc.BindPort = bind.Addr().String(), int(bind.Port())
	adv := m.Advertise
	if !adv.IsValid() {
		addr := bind.Addr()
		if addr.IsUnspecified() {
			var err error
			if addr, err = interfaceAddr(a.cfg.Interface, addr.Is4()); err != nil {
				return fmt.Errorf(`l2: field "members.bind" %q is unspecified and %w; set members.advertise`, bind, err)
			}
		}
		adv = netip.AddrPortFrom(addr, bind.Port())
	}
	mc.AdvertiseAddr, mc.AdvertisePort = adv.Addr().String(), int(adv.Port())
	a.advertise = adv.String()

	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.SuspicionMult = t.SuspicionMult
	mc.GossipInterval = t.GossipInterval
	mc.IndirectChecks = t.IndirectChecks
	mc.TCPTimeout = t.TCPTimeout
	mc.PushPullInterval = t.PushPullInterval
	if len(m.Key) > 0 {
		mc.SecretKey = m.Key
	}
	// A gateway that comes back with a new address (DHCP, re-addressing)
	// may take its name back after this long instead of never.
	mc.DeadNodeReclaimTime = 10 * time.Second
	d := &delegate{a: a}
	mc.Delegate, mc.Events = d, d
	mc.Logger = log.New(&logWriter{log: a.log.With("component", "memberlist")}, "", 0)

	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("l2: start memberlist on %s: %w", bind, err)
	}
	a.ml = ml
	a.wg.Add(1)
	go a.joinLoop()
	return nil
}

// interfaceAddr is the first global unicast address of the family on ifName.
func interfaceAddr(ifName string, v4 bool) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(ifName)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("interface %q: %w", ifName, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %q: %w", ifName, err)
	}
	for _, x := range addrs {
		p, err := netip.ParsePrefix(x.String())
		if err != nil {
			continue
		}
		if a := p.Addr().Unmap(); a.Is4() == v4 && a.IsGlobalUnicast() {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %q has no address to advertise", ifName)
}

// joinLoop joins the configured members, then keeps re-joining any that is
// not a live member: memberlist forgets a dead node after a while and never
// looks for it again, so without this two gateways separated for longer
// (partition, both restarted) would each stay alone and both own every VIP.
func (a *Announcer) joinLoop() {
	defer a.wg.Done()
	first := true
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		if missing := a.missingMembers(); len(missing) > 0 {
			n, err := a.ml.Join(missing)
			if err != nil && first {
				a.log.Warn("could not join any member yet; alone until one answers", "members", missing, "err", err)
			} else if n > 0 {
				a.log.Info("joined", "contacted", n)
			}
		}
		if first {
			first = false
			a.mu.Lock()
			a.joined = true
			a.updateReadinessLocked()
			a.mu.Unlock()
			a.poke()
		}
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// missingMembers lists configured members that are not live members now.
func (a *Announcer) missingMembers() []string {
	live := map[string]bool{}
	for _, n := range a.ml.Members() {
		live[net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))] = true
	}
	var out []string
	for _, j := range a.cfg.Members.Join {
		s := net.JoinHostPort(j.Addr().String(), strconv.Itoa(int(j.Port())))
		if !live[s] && s != a.advertise {
			out = append(out, s)
		}
	}
	return out
}

// send delivers our state to one member over memberlist's reliable channel,
// retrying briefly while the member is alive: the handover waits for these
// messages, so a lost one would only delay it until the next push/pull.
func (a *Announcer) send(n memberlist.Node, msg []byte) {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	if a.sendsClosed {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		delay := 50 * time.Millisecond
		for attempt := 0; attempt < 4; attempt++ {
			err := a.ml.SendReliable(&n, msg)
			if err == nil {
				return
			}
			if attempt == 3 {
				a.log.Warn("could not send state; push/pull or the next change will carry it", "to", n.Name, "err", err)
				return
			}
			a.log.Info("send state failed, retrying", "to", n.Name, "attempt", attempt+1, "err", err)
			select {
			case <-a.ctx.Done():
				return
			case <-time.After(delay):
			}
			delay *= 2
			a.mu.Lock()
			p := a.peers[n.Name]
			alive := p != nil && p.alive
			a.mu.Unlock()
			if !alive {
				return
			}
		}
	}()
}

// sendStateSync sends our state to every live member and waits (bounded):
// used on a withdrawing Close so the others take over before we leave.
func (a *Announcer) sendStateSync(timeout time.Duration) {
	a.mu.Lock()
	msg := a.self.marshal()
	var nodes []memberlist.Node
	for _, p := range a.peers {
		if p.alive {
			nodes = append(nodes, p.node)
		}
	}
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.ml.SendReliable(&n, msg)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// receive stores a member's state if it is newer than what we have.
func (a *Announcer) receive(b []byte) {
	s, err := unmarshalState(b)
	if err != nil {
		a.log.Warn("ignored member state", "err", err)
		return
	}
	a.mu.Lock()
	if s.Name == a.name {
		a.mu.Unlock()
		return
	}
	p := a.peerLocked(s.Name)
	if s.WantReply {
		p.needsState = true // answered by the next reconcile
	}
	// Older than what we have seen: late, drop it. The same generation is
	// taken only to refill the state of a live member we had dropped (it was
	// falsely declared dead and is answering our request); from a member we
	// believe dead it is a message of the dead process still in flight.
	if s.Gen < p.lastGen || (s.Gen == p.lastGen && (p.state != nil || !p.alive)) {
		last := p.lastGen
		a.mu.Unlock()
		a.log.Debug("stale member state ignored", "member", s.Name, "gen", s.Gen, "last", last)
		if s.WantReply {
			a.poke()
		}
		return
	}
	s.WantReply = false
	p.lastGen = s.Gen
	p.state = &s
	p.vips, p.claimed = setOf(s.VIPs), setOf(s.Claimed)
	a.mu.Unlock()
	a.poke()
}

func (a *Announcer) peerLocked(name string) *peer {
	p := a.peers[name]
	if p == nil {
		p = &peer{node: memberlist.Node{Name: name}, since: time.Now()}
		a.peers[name] = p
	}
	return p
}

func setOf(l []netip.Addr) map[netip.Addr]bool {
	m := make(map[netip.Addr]bool, len(l))
	for _, a := range l {
		m[a] = true
	}
	return m
}

// delegate adapts memberlist's callbacks. They run on memberlist's
// goroutines (some under its node lock): they only record and poke.
type delegate struct{ a *Announcer }

func (d *delegate) NodeMeta(int) []byte               { return nil }
func (d *delegate) GetBroadcasts(int, int) [][]byte   { return nil }
func (d *delegate) NotifyMsg(b []byte)                { d.a.receive(bytes.Clone(b)) }
func (d *delegate) MergeRemoteState(b []byte, _ bool) { d.a.receive(bytes.Clone(b)) }
func (d *delegate) NotifyJoin(n *memberlist.Node)     { d.a.memberAlive(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node)   { d.a.memberAlive(n) }
func (d *delegate) NotifyLeave(n *memberlist.Node)    { d.a.memberGone(n) }

func (d *delegate) LocalState(bool) []byte {
	d.a.mu.Lock()
	defer d.a.mu.Unlock()
	return d.a.self.marshal()
}

func (a *Announcer) memberAlive(n *memberlist.Node) {
	if n.Name == a.name {
		return
	}
	a.mu.Lock()
	p := a.peerLocked(n.Name)
	p.node = *n
	p.node.Meta = nil
	joined := !p.alive
	if joined {
		// Send it our state, and ask for its own if we have none: after we
		// declared it dead (and dropped its state) it may come back without
		// noticing anything, and would not send its state on its own.
		p.alive, p.left, p.since, p.needsState = true, false, time.Now(), true
		p.askState, p.askedAt, p.warned = p.state == nil, time.Time{}, false
	}
	a.mu.Unlock()
	if joined {
		a.log.Info("member alive", "member", n.Name, "address", n.Address())
	}
	a.poke()
}

func (a *Announcer) memberGone(n *memberlist.Node) {
	if n.Name == a.name {
		return
	}
	a.mu.Lock()
	p := a.peerLocked(n.Name)
	left := n.State == memberlist.StateLeft
	p.alive, p.left, p.since = false, left, time.Now()
	// Its claims die with it: a failed gateway answers nothing. lastGen is
	// kept so a message from the dead process still in flight is ignored.
	p.state, p.vips, p.claimed = nil, nil, nil
	a.mu.Unlock()
	how := "failed"
	if left {
		how = "left"
	}
	a.log.Info("member gone", "member", n.Name, "how", how)
	a.poke()
}

// logWriter turns memberlist's "[LEVEL] memberlist: ..." lines into slog records.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	lvl := slog.LevelDebug
	for prefix, l := range map[string]slog.Level{"[ERR]": slog.LevelError, "[WARN]": slog.LevelWarn, "[INFO]": slog.LevelInfo} {
		if bytes.Contains(p, []byte(prefix)) {
			lvl = l
		}
	}
	w.log.Log(context.Background(), lvl, line)
	return len(p), nil
}

var _ io.Writer = (*logWriter)(nil)
