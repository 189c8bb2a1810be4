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
	// memberlist's default LZW-compresses every packet: a new compressor
	// (a large allocation) per probe, ack and gossip, ~25 a second per peer
	// at these intervals, for messages of tens of bytes. In the failover lab
	// it was most of the daemon's allocations and the GC they caused, and
	// the lion's share of an idle gateway's CPU. Receivers decode both forms,
	// so gateways of either setting interoperate.
	mc.EnableCompression = false
	if len(m.Key) > 0 {
		mc.SecretKey = m.Key
	}
	// A gateway that comes back with a new address (DHCP, re-addressing)
	// may take its name back after this long instead of never.
	mc.DeadNodeReclaimTime = 10 * time.Second
	d := &delegate{a: a}
	mc.Delegate, mc.Events = d, d
	a.acks = &acks{}
	mc.Ping = a.acks
	mc.Logger = log.New(&logWriter{log: a.log.With("component", "memberlist")}, "", 0)

	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("l2: start memberlist on %s: %w", bind, err)
	}
	a.ml = ml
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
			a.inbox.post(event{kind: evJoined})
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
// Called by the keeper only; the sending runs on its own goroutine so the
// keeper never waits on the network.
func (k *keeper) send(n memberlist.Node, msg []byte) {
	if k.sendsClosed {
		return
	}
	a := k.a
	// The keeper is counted in a.wg until it returns, so this Add never
	// races Close's Wait.
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
			if !a.snap.Load().alive(n.Name) {
				return
			}
		}
	}()
}

// sendStateSync sends our state to every live member and waits (bounded):
// used on a withdrawing Close so the others take over before we leave.
func (a *Announcer) sendStateSync(timeout time.Duration) {
	s := a.snap.Load()
	var wg sync.WaitGroup
	for _, p := range s.peers {
		if !p.alive {
			continue
		}
		n := p.node
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.ml.SendReliable(&n, s.selfMsg)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// receive hands a member's state to the keeper (memberlist's goroutine:
// parsing is pure, nothing here waits).
func (a *Announcer) receive(b []byte) {
	s, err := unmarshalState(b)
	if err != nil {
		a.log.Warn("ignored member state", "err", err)
		return
	}
	if s.Name == a.name {
		return
	}
	a.inbox.post(event{kind: evState, state: s})
}

// delegate adapts memberlist's callbacks. They run on memberlist's
// goroutines (some under its node lock): they only post events to the
// keeper or read its snapshot.
type delegate struct{ a *Announcer }

func (d *delegate) NodeMeta(int) []byte               { return nil }
func (d *delegate) GetBroadcasts(int, int) [][]byte   { return nil }
func (d *delegate) NotifyMsg(b []byte)                { d.a.receive(bytes.Clone(b)) }
func (d *delegate) MergeRemoteState(b []byte, _ bool) { d.a.receive(bytes.Clone(b)) }
func (d *delegate) NotifyJoin(n *memberlist.Node)     { d.a.memberAlive(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node)   { d.a.memberAlive(n) }
func (d *delegate) NotifyLeave(n *memberlist.Node)    { d.a.memberGone(n) }
func (d *delegate) LocalState(bool) []byte            { return d.a.snap.Load().selfMsg }

// memberAlive tells the keeper memberlist sees n alive.
func (a *Announcer) memberAlive(n *memberlist.Node) {
	if n.Name == a.name {
		return
	}
	node := *n
	node.Meta = nil
	a.inbox.post(event{kind: evAlive, node: node})
}

// memberGone tells the keeper memberlist declared n dead or gone. Logged
// here, when memberlist decides (the failover lab times false deaths by it).
func (a *Announcer) memberGone(n *memberlist.Node) {
	if n.Name == a.name {
		return
	}
	node := *n
	node.Meta = nil
	how := "failed"
	if n.State == memberlist.StateLeft {
		how = "left"
	}
	a.log.Info("member gone", "member", n.Name, "how", how)
	a.inbox.post(event{kind: evGone, node: node})
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
