//go:build failover

package l2

// The client side of the failover lab: an ARP/NDP prober whose every
// request can be matched to its answers, a neighbour-table watcher and an
// HTTP load, all in the client namespace.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
)

// prober asks "who has VIP?" every interval for each VIP, from a sender
// address that encodes a sequence number (ARP: 203.0.113.N; NDP:
// 2001:db8::ff:N), so each answer names the probe it answers: two MACs
// answering one probe is split brain seen on the wire.
type prober struct {
	arpc, ndpc *packet.Conn
	mac        net.HardwareAddr
	vips       []netip.Addr

	mu      sync.Mutex
	seq     int
	sentAt  map[probeKey]time.Duration
	answers map[probeKey]map[string]bool // probe → MACs that answered
	announc []announcement               // gratuitous ARP / unsolicited NA
	stop    chan struct{}
	wg      sync.WaitGroup
}

type probeKey struct {
	vip netip.Addr
	seq int // sequence number (the sender address encodes seq % 250)
}

type announcement struct {
	at  time.Duration
	vip netip.Addr
	mac string
}

func newProber(t *testing.T, ns *netns.NS, ifName string, vips []netip.Addr, every time.Duration) *prober {
	t.Helper()
	p := &prober{vips: vips, sentAt: map[probeKey]time.Duration{}, answers: map[probeKey]map[string]bool{}, stop: make(chan struct{})}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		p.mac = ifi.HardwareAddr
		if p.arpc, err = packet.Listen(ifi, packet.Raw, 0x0806, nil); err != nil {
			return err
		}
		p.ndpc, err = packet.Listen(ifi, packet.Raw, 0x86DD, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p.wg.Add(3)
	go p.readARP()
	go p.readNDP()
	go p.send(every)
	t.Cleanup(p.close)
	return p
}

func (p *prober) close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.arpc.Close()
	p.ndpc.Close()
	p.wg.Wait()
}

func probeSender4(seq int) netip.Addr {
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(seq%250 + 1)})
}
func probeSender6(seq int) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 13: 0xff, 15: byte(seq%250 + 1)})
}

func (p *prober) send(every time.Duration) {
	defer p.wg.Done()
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
		}
		p.mu.Lock()
		p.seq++
		seq := p.seq
		p.mu.Unlock()
		for _, v := range p.vips {
			// Stamped before sending: the answer can be back before WriteTo returns.
			k := probeKey{v, seq}
			p.mu.Lock()
			p.sentAt[k] = mono()
			p.mu.Unlock()
			var err error
			if v.Is4() {
				err = p.sendARP(v, seq)
			} else {
				err = p.sendNS(v, seq)
			}
			if err != nil {
				p.mu.Lock()
				delete(p.sentAt, k)
				p.mu.Unlock()
			}
		}
	}
}

func (p *prober) sendARP(vip netip.Addr, seq int) error {
	pk, err := arp.NewPacket(arp.OperationRequest, p.mac, probeSender4(seq), ethernet.Broadcast, vip)
	if err != nil {
		return err
	}
	pb, _ := pk.MarshalBinary()
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: p.mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, _ := f.MarshalBinary()
	_, err = p.arpc.WriteTo(b, &packet.Addr{HardwareAddr: ethernet.Broadcast})
	return err
}

func (p *prober) sendNS(vip netip.Addr, seq int) error {
	src := probeSender6(seq)
	dst, _ := ndp.SolicitedNodeMulticast(vip)
	ns := &ndp.NeighborSolicitation{TargetAddress: vip,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: p.mac}}}
	body, err := ndp.MarshalMessageChecksum(ns, src, dst)
	if err != nil {
		return err
	}
	d := dst.As16()
	dmac := net.HardwareAddr{0x33, 0x33, d[12], d[13], d[14], d[15]}
	b, _ := (&ethernet.Frame{Destination: dmac, Source: p.mac, EtherType: ethernet.EtherTypeIPv6,
		Payload: append(ipv6Header(src, dst, len(body)), body...)}).MarshalBinary()
	_, err = p.ndpc.WriteTo(b, &packet.Addr{HardwareAddr: dmac})
	return err
}

func ipv6Header(src, dst netip.Addr, plen int) []byte {
	h := make([]byte, 40)
	h[0] = 6 << 4
	binary.BigEndian.PutUint16(h[4:6], uint16(plen))
	h[6], h[7] = 58, 255
	s, d := src.As16(), dst.As16()
	copy(h[8:24], s[:])
	copy(h[24:40], d[:])
	return h
}

// seqOf finds the outstanding probe a sender address refers to (the latest
// probe with that residue).
func (p *prober) seqOf(vip netip.Addr, low byte) (int, bool) {
	for s := p.seq; s > p.seq-250 && s > 0; s-- {
		if byte(s%250+1) == low {
			_, ok := p.sentAt[probeKey{vip, s}]
			return s, ok
		}
	}
	return 0, false
}

func (p *prober) record(vip netip.Addr, low byte, mac net.HardwareAddr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq, ok := p.seqOf(vip, low)
	if !ok {
		return
	}
	k := probeKey{vip, seq}
	if p.answers[k] == nil {
		p.answers[k] = map[string]bool{}
	}
	p.answers[k][mac.String()] = true
}

func (p *prober) announce(vip netip.Addr, mac net.HardwareAddr) {
	p.mu.Lock()
	p.announc = append(p.announc, announcement{mono(), vip, mac.String()})
	p.mu.Unlock()
}

func (p *prober) readARP() {
	defer p.wg.Done()
	buf := make([]byte, 1518)
	for {
		n, _, err := p.arpc.ReadFrom(buf)
		if err != nil {
			return
		}
		var f ethernet.Frame
		var pk arp.Packet
		if f.UnmarshalBinary(buf[:n]) != nil || pk.UnmarshalBinary(f.Payload) != nil || bytes.Equal(f.Source, p.mac) {
			continue
		}
		switch {
		case pk.SenderIP == pk.TargetIP:
			p.announce(pk.SenderIP, pk.SenderHardwareAddr)
		case pk.Operation == arp.OperationReply && pk.TargetIP.Is4() && pk.TargetIP.As4()[2] == 113 && pk.TargetIP.As4()[0] == 203:
			p.record(pk.SenderIP, pk.TargetIP.As4()[3], pk.SenderHardwareAddr)
		}
	}
}

func (p *prober) readNDP() {
	defer p.wg.Done()
	buf := make([]byte, 9216)
	for {
		n, _, err := p.ndpc.ReadFrom(buf)
		if err != nil {
			return
		}
		var f ethernet.Frame
		if f.UnmarshalBinary(buf[:n]) != nil || len(f.Payload) < 44 || f.Payload[6] != 58 || bytes.Equal(f.Source, p.mac) {
			continue
		}
		plen := int(binary.BigEndian.Uint16(f.Payload[4:6]))
		if 40+plen > len(f.Payload) {
			continue
		}
		m, err := ndp.ParseMessage(f.Payload[40 : 40+plen])
		if err != nil {
			continue
		}
		na, ok := m.(*ndp.NeighborAdvertisement)
		if !ok {
			continue
		}
		var lla net.HardwareAddr
		for _, o := range na.Options {
			if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == ndp.Target {
				lla = l.Addr
			}
		}
		dst, _ := netip.AddrFromSlice(f.Payload[24:40])
		d := dst.As16()
		switch {
		case dst.IsMulticast():
			p.announce(na.TargetAddress, lla)
		case d[0] == 0x20 && d[1] == 0x01 && d[13] == 0xff && bytes.Equal(d[2:13], []byte{0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0}):
			p.record(na.TargetAddress, d[15], lla)
		}
	}
}

// wireStats summarises the probes sent in [from, to).
type wireStats struct {
	probes, answered, split int
	macs                    map[netip.Addr]map[string]int // VIP → MAC → probes answered
	splitVIPs               map[netip.Addr]int            // VIP → probes answered by two MACs
	splitExamples           []string
}

func (p *prober) stats(from, to time.Duration) wireStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := wireStats{macs: map[netip.Addr]map[string]int{}, splitVIPs: map[netip.Addr]int{}}
	for k, at := range p.sentAt {
		if at < from || at >= to {
			continue
		}
		w.probes++
		ans := p.answers[k]
		if len(ans) > 0 {
			w.answered++
		}
		if len(ans) > 1 {
			w.split++
			w.splitVIPs[k.vip]++
			if len(w.splitExamples) < 5 {
				w.splitExamples = append(w.splitExamples, fmt.Sprintf("%s probe %d answered by %v", k.vip, k.seq, ans))
			}
		}
		if w.macs[k.vip] == nil {
			w.macs[k.vip] = map[string]int{}
		}
		for m := range ans {
			w.macs[k.vip][m]++
		}
	}
	return w
}

func (p *prober) announcements(from, to time.Duration) []announcement {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []announcement
	for _, a := range p.announc {
		if a.at >= from && a.at < to {
			out = append(out, a)
		}
	}
	return out
}

// neighWatch records every change of the client's neighbour entries.
type neighWatch struct {
	mu      sync.Mutex
	changes []neighChange
	done    chan struct{}
}

type neighChange struct {
	at  time.Duration
	ip  netip.Addr
	mac string
}

func watchNeigh(t *testing.T, ns *netns.NS) *neighWatch {
	t.Helper()
	w := &neighWatch{done: make(chan struct{})}
	ch := make(chan netlink.NeighUpdate, 1024)
	h := ns.Handle()
	if err := netlink.NeighSubscribeWithOptions(ch, w.done, netlink.NeighSubscribeOptions{Namespace: &h}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for u := range ch {
			ip, ok := netip.AddrFromSlice(u.IP)
			if !ok || u.HardwareAddr == nil {
				continue
			}
			w.mu.Lock()
			w.changes = append(w.changes, neighChange{mono(), ip.Unmap(), u.HardwareAddr.String()})
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(w.done) })
	return w
}

// firstMAC returns when ip's entry first showed mac at or after from.
func (w *neighWatch) firstMAC(ip netip.Addr, mac string, from time.Duration) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.changes {
		if c.at >= from && c.ip == ip && c.mac == mac {
			return c.at, true
		}
	}
	return 0, false
}

// load sends an HTTP request to vip every interval (each a new connection,
// short timeout) and records when answers came and from which gateway.
type load struct {
	mu      sync.Mutex
	results []result
	stop    chan struct{}
	wg      sync.WaitGroup
}

type result struct {
	start, end time.Duration
	body       string // gateway name, "" on failure
}

func startLoad(ns *netns.NS, vip netip.Addr, every, timeout time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: ns.DialContext, DisableKeepAlives: true}}
	url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tk.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				r := result{start: mono()}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				if resp, err := client.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						r.body = string(b)
					}
				}
				r.end = mono()
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
			}()
		}
	}()
	return l
}

func (l *load) close() {
	close(l.stop)
	l.wg.Wait()
}

// firstSuccess is the end of the first request started at or after from
// that was answered by gw.
func (l *load) firstSuccess(gw string, from time.Duration) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best, ok := time.Duration(0), false
	for _, r := range l.results {
		if r.start >= from && r.body == gw && (!ok || r.end < best) {
			best, ok = r.end, true
		}
	}
	return best, ok
}

func (l *load) counts(from time.Duration) (ok, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.results {
		if r.start < from {
			continue
		}
		if r.body != "" {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}
