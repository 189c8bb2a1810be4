package conformance

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// outOfWindow: one TCP segment outside the window from a backend (a late
// retransmission, reordering under load) must not reset the connection it
// belongs to (kubernetes#74839, found by kube-proxy under load). Strict
// window tracking marks such a segment invalid and NAT skips invalid
// packets: with SNAT it reaches the gateway itself untranslated, the gateway
// answers with a RST, and the backend's side of the connection dies. The
// dataplane sets nf_conntrack_tcp_be_liberal=1 (hostcheck's list, with
// SetSysctls), so the segment stays in its connection and the client's TCP
// drops it.
//
// The same injection with the kernel's default (be_liberal=0) must reset
// the connection — the scenario sees the failure it guards against — and
// Resync must put the setting back, as it repairs the tables.
func (s *suite) outOfWindow(t *testing.T) {
	const key = "net.netfilter.nf_conntrack_tcp_be_liberal"
	const port = 9100
	be := s.topo.Backends[0]
	vip := s.vip4()
	svc := proxy.Service{Name: "conformance/window", VIP: vip, Port: port, Protocol: proxy.TCP,
		Scheduler: proxy.DefaultScheduler, Method: proxy.NAT,
		Backends: []proxy.Backend{{Addr: s.topo.Backend4(0, port), Weight: 1}}}
	s.apply(t, svc)
	if v, err := s.topo.Gateway.ReadSysctl(key); err != nil || strings.TrimSpace(v) != "1" {
		t.Fatalf("the dataplane left %s = %q (%v), want 1", key, v, err)
	}
	ln, err := be.NS.Listen("tcp", s.topo.Backend4(0, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	to := netip.AddrPortFrom(vip, port)
	if ok, how := oneOutOfWindow(t, s.topo.Client, be.NS, ln, to); !ok {
		t.Fatalf("as the dataplane sets it (be_liberal=1): %s", how)
	} else {
		t.Logf("be_liberal=1 (the dataplane's): %s", how)
	}
	if err := s.topo.Gateway.Sysctl(key, "0"); err != nil {
		t.Fatal(err)
	}
	if ok, how := oneOutOfWindow(t, s.topo.Client, be.NS, ln, to); ok {
		t.Fatalf("with the kernel's default (be_liberal=0) the connection survived the segment: the scenario no longer sees the failure (%s)", how)
	} else {
		t.Logf("be_liberal=0 (the kernel's default): %s", how)
	}
	if err := s.dp.Resync(s.ctx); err != nil {
		t.Fatalf("resync: %v", err)
	}
	if v, err := s.topo.Gateway.ReadSysctl(key); err != nil || strings.TrimSpace(v) != "1" {
		t.Fatalf("after Resync %s = %q (%v), want 1 again", key, v, err)
	}
}

// oneOutOfWindow opens a connection through vip to the listener, exchanges
// a line each way, then sends one segment 2^30 bytes ahead of the backend's
// sequence (acknowledging exactly what the client sent, as a real late
// segment would) from the backend's namespace, and reports whether the
// connection still carries data both ways afterwards.
func oneOutOfWindow(t *testing.T, client, beNS *netns.NS, ln net.Listener, vip netip.AddrPort) (bool, string) {
	t.Helper()
	sn := sniff(t, beNS, "eth0")
	defer sn.close()
	c, err := client.DialContext(t.Context(), "tcp", vip.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cr, sr := bufio.NewReader(c), bufio.NewReader(s)
	// exchange writes a line on from and reads it at the other end (the
	// caller sets both connections' deadlines).
	exchange := func(from net.Conn, to *bufio.Reader, line string) error {
		if _, err := fmt.Fprintln(from, line); err != nil {
			return err
		}
		got, err := to.ReadString('\n')
		if err != nil {
			return err
		}
		if got != line+"\n" {
			return fmt.Errorf("read %q, want %q", got, line)
		}
		return nil
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := exchange(c, sr, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := exchange(s, cr, "pong"); err != nil {
		t.Fatal(err)
	}
	// The backend's view of the connection: the peer (the gateway's SNAT
	// address and port) and both sides' next sequence numbers, from the
	// segments its interface saw. The sniffer reads its socket on its own
	// goroutine, so wait until it has taken in both lines: an earlier
	// sequence number puts the gateway's RST outside the backend's exact
	// match (RFC 5961 answers it with a challenge ACK) and the connection
	// would survive for a reason that has nothing to do with be_liberal.
	local, peer := s.LocalAddr().(*net.TCPAddr).AddrPort(), s.RemoteAddr().(*net.TCPAddr).AddrPort()
	toBE, fromBE, ok := sn.last(local, peer, len("ping\n"), len("pong\n"), 5*time.Second)
	if !ok {
		t.Fatalf("the backend's interface did not see both lines between %s and %s", local, peer)
	}
	seg := tcpSegment(fromBE.src, toBE.src, fromBE.next+1<<30, toBE.next, []byte("x"))
	fd, err := rawSocket(beNS)
	if err != nil {
		t.Fatal(err)
	}
	to := unix.SockaddrInet4{Addr: toBE.src.Addr().As4()}
	err = unix.Sendto(fd, seg, 0, &to)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("send the segment: %v", err)
	}
	// The gateway's RST, if one comes, arrives within microseconds; wait
	// for it (or 2 s without one) rather than a fixed pause a busy machine
	// could outrun.
	sn.rstFrom(peer, local, 2*time.Second)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := exchange(s, cr, "after"); err != nil {
		return false, fmt.Sprintf("backend → client after the segment: %v", err)
	}
	if err := exchange(c, sr, "after too"); err != nil {
		return false, fmt.Sprintf("client → backend after the segment: %v", err)
	}
	return true, fmt.Sprintf("a segment from %s to %s at seq+2^30 left the connection carrying data both ways", fromBE.src, toBE.src)
}

// seen is the last segment of one direction: its source and the sequence
// number after it.
type seen struct {
	src  netip.AddrPort
	next uint32
}

// sniffer records the TCP segments an interface sends and receives.
type sniffer struct {
	fd   int
	mu   sync.Mutex
	segs map[[2]netip.AddrPort]uint32 // (src, dst) → next sequence
	data map[[2]netip.AddrPort]int    // (src, dst) → payload bytes seen
	rst  map[[2]netip.AddrPort]bool   // (src, dst) → a RST seen
	done chan struct{}
}

func sniff(t *testing.T, ns *netns.NS, ifName string) *sniffer {
	t.Helper()
	sn := &sniffer{segs: map[[2]netip.AddrPort]uint32{}, data: map[[2]netip.AddrPort]int{}, rst: map[[2]netip.AddrPort]bool{}, done: make(chan struct{})}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
		if err != nil {
			return err
		}
		sn.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("packet socket in %s: %v", ns.Name, err)
	}
	go func() {
		defer close(sn.done)
		buf := make([]byte, 65536)
		for {
			n, _, err := unix.Recvfrom(sn.fd, buf, 0)
			if err != nil {
				return
			}
			sn.record(buf[:n])
		}
	}()
	return sn
}

func (sn *sniffer) record(f []byte) {
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != unix.ETH_P_IP {
		return
	}
	ip := f[14:]
	ihl := int(ip[0]&15) * 4
	if ip[9] != unix.IPPROTO_TCP || len(ip) < ihl+20 {
		return
	}
	tcp := ip[ihl:]
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(tcp[0:]))
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(tcp[2:]))
	payload := int(binary.BigEndian.Uint16(ip[2:])) - ihl - int(tcp[12]>>4)*4
	next := binary.BigEndian.Uint32(tcp[4:]) + uint32(payload)
	if tcp[13]&0x03 != 0 { // SYN or FIN take one sequence number
		next++
	}
	sn.mu.Lock()
	sn.segs[[2]netip.AddrPort{src, dst}] = next
	sn.data[[2]netip.AddrPort{src, dst}] += payload
	if tcp[13]&0x04 != 0 {
		sn.rst[[2]netip.AddrPort{src, dst}] = true
	}
	sn.mu.Unlock()
}

// last returns the newest segment each way between local and peer, once
// at least in payload bytes came in and out went out.
func (sn *sniffer) last(local, peer netip.AddrPort, in, out int, within time.Duration) (toLocal, fromLocal seen, ok bool) {
	local, peer = netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		sn.mu.Lock()
		toNext, fromNext := sn.segs[[2]netip.AddrPort{peer, local}], sn.segs[[2]netip.AddrPort{local, peer}]
		done := sn.data[[2]netip.AddrPort{peer, local}] >= in && sn.data[[2]netip.AddrPort{local, peer}] >= out
		sn.mu.Unlock()
		if done {
			return seen{peer, toNext}, seen{local, fromNext}, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return
}

// rstFrom reports whether a RST from src to dst was seen within the time.
func (sn *sniffer) rstFrom(src, dst netip.AddrPort, within time.Duration) bool {
	src, dst = netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		sn.mu.Lock()
		seen := sn.rst[[2]netip.AddrPort{src, dst}]
		sn.mu.Unlock()
		if seen {
			return true
		}
	}
	return false
}

func (sn *sniffer) close() {
	unix.Close(sn.fd)
	<-sn.done
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// rawSocket opens an IPv4 raw socket (IP header included) in ns.
func rawSocket(ns *netns.NS) (int, error) {
	var fd int
	err := ns.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	})
	return fd, err
}

// tcpSegment builds an IPv4 packet with one ACK|PSH segment.
func tcpSegment(src, dst netip.AddrPort, seq, ack uint32, payload []byte) []byte {
	tcp := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(tcp[0:], src.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH, ACK
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], payload)
	s, d := src.Addr().As4(), dst.Addr().As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, unix.IPPROTO_TCP, byte(len(tcp)>>8), byte(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:], checksum(append(pseudo, tcp...)))
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
	ip[8] = 64
	ip[9] = unix.IPPROTO_TCP
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	return append(ip, tcp...)
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
