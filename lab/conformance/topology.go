package conformance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Ports every backend listens on (all addresses, IPv4 and IPv6).
const (
	HTTPPort = 8080 // HTTP: the body is the backend's name, X-Remote-Addr is the peer it saw
	UDPPort  = 5353 // UDP echo: replies "NAME PEER"
	HoldPort = 9000 // TCP: greets with "NAME\n", then echoes lines until EOF (long-lived connections)
)

// Lab addresses (documentation ranges only).
var (
	ClientAddr4  = netip.MustParseAddr("192.0.2.2")
	ClientAddr6  = netip.MustParseAddr("2001:db8:1::2")
	GatewayAddr4 = netip.MustParseAddr("192.0.2.1") // the gateway's node address facing the client
	GatewayAddr6 = netip.MustParseAddr("2001:db8:1::1")
)

// Backend is one backend namespace with its servers.
type Backend struct {
	Name  string // "be1", "be2", "be3": what its servers answer
	NS    *netns.NS
	Addr4 netip.Addr
	Addr6 netip.Addr
	// GatewayAddr4/6 are the gateway's addresses on this backend's link: the
	// source a backend sees when the gateway masquerades.
	GatewayAddr4 netip.Addr
	GatewayAddr6 netip.Addr
}

// Topology is client ns — gateway ns — 3 backend ns, each backend on its own
// veth (no bridge: the guest kernel need not have the bridge module).
//
//	client (192.0.2.2/24, 2001:db8:1::2/64, + extra sources 192.0.2.16-31)
//	  eth0 ── cli0  gateway (192.0.2.1/24, 2001:db8:1::1/64; ip_forward=1)
//	                  bK ── eth0  beK (198.51.100.4K+2/30, 2001:db8:10K::2/64)
//
// Clients and backends route everything through the gateway, so VIPs need no
// route of their own and NAT-without-SNAT replies come back through it.
type Topology struct {
	Client   *netns.NS
	Gateway  *netns.NS
	Backends []Backend
	// ClientSources are extra IPv4 source addresses of the client (for
	// per-client stickiness checks); ClientAddr4 is the primary one.
	ClientSources []netip.Addr
	// ClientLink is the gateway's link towards the client.
	ClientLink string
}

// NewTopology builds the lab; everything is deleted when the test ends.
// prefix keeps namespace names of parallel test processes apart.
func NewTopology(t testing.TB, prefix string) *Topology {
	t.Helper()
	netns.RequireRoot(t)
	topo := &Topology{
		Client:     netns.NewT(t, prefix+"c"),
		Gateway:    netns.NewT(t, prefix+"g"),
		ClientLink: "cli0",
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	c, g := topo.Client, topo.Gateway
	must(netns.Veth(c, "eth0", g, topo.ClientLink))
	must(c.AddAddr("eth0", netip.PrefixFrom(ClientAddr4, 24)))
	must(c.AddAddr("eth0", netip.PrefixFrom(ClientAddr6, 64)))
	for i := 16; i < 32; i++ {
		a := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		must(c.AddAddr("eth0", netip.PrefixFrom(a, 24)))
		topo.ClientSources = append(topo.ClientSources, a)
	}
	must(g.AddAddr(topo.ClientLink, netip.PrefixFrom(GatewayAddr4, 24)))
	must(g.AddAddr(topo.ClientLink, netip.PrefixFrom(GatewayAddr6, 64)))
	must(c.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), GatewayAddr4))
	must(c.AddRoute(netip.MustParsePrefix("::/0"), GatewayAddr6))
	must(g.Sysctl("net.ipv4.ip_forward", "1"))
	must(g.Sysctl("net.ipv6.conf.all.forwarding", "1"))
	// A frontend that is gone answers with ICMP unreachable; without a rate
	// limit the client fails at once instead of waiting for a timeout.
	must(g.Sysctl("net.ipv4.icmp_ratelimit", "0"))
	must(g.Sysctl("net.ipv6.icmp.ratelimit", "0"))

	for i := 1; i <= 3; i++ {
		b := Backend{
			Name:         fmt.Sprintf("be%d", i),
			NS:           netns.NewT(t, fmt.Sprintf("%sb%d", prefix, i)),
			Addr4:        netip.AddrFrom4([4]byte{198, 51, 100, byte(4*i + 2)}),
			GatewayAddr4: netip.AddrFrom4([4]byte{198, 51, 100, byte(4*i + 1)}),
			Addr6:        netip.MustParseAddr(fmt.Sprintf("2001:db8:10%d::2", i)),
			GatewayAddr6: netip.MustParseAddr(fmt.Sprintf("2001:db8:10%d::1", i)),
		}
		link := fmt.Sprintf("b%d", i)
		must(netns.Veth(g, link, b.NS, "eth0"))
		must(g.AddAddr(link, netip.PrefixFrom(b.GatewayAddr4, 30)))
		must(g.AddAddr(link, netip.PrefixFrom(b.GatewayAddr6, 64)))
		must(b.NS.AddAddr("eth0", netip.PrefixFrom(b.Addr4, 30)))
		must(b.NS.AddAddr("eth0", netip.PrefixFrom(b.Addr6, 64)))
		must(b.NS.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), b.GatewayAddr4))
		must(b.NS.AddRoute(netip.MustParsePrefix("::/0"), b.GatewayAddr6))
		startServers(t, b)
		topo.Backends = append(topo.Backends, b)
	}
	return topo
}

// Backend4 returns backend i's IPv4 address with port.
func (topo *Topology) Backend4(i int, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(topo.Backends[i].Addr4, port)
}

// Backend6 returns backend i's IPv6 address with port.
func (topo *Topology) Backend6(i int, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(topo.Backends[i].Addr6, port)
}

// backendByName finds a backend by the name its servers answer.
func (topo *Topology) backendByName(name string) *Backend {
	for i := range topo.Backends {
		if topo.Backends[i].Name == name {
			return &topo.Backends[i]
		}
	}
	return nil
}

// startServers runs the HTTP, UDP echo and hold servers of one backend
// until the test ends.
func startServers(t testing.TB, b Backend) {
	t.Helper()
	hl, err := b.NS.Listen("tcp", fmt.Sprintf(":%d", HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Remote-Addr", r.RemoteAddr)
			io.WriteString(w, b.Name)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(hl)
	t.Cleanup(func() { srv.Close() })

	pc, err := b.NS.ListenPacket("udp", fmt.Sprintf(":%d", UDPPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_ = n
			fa := from.(*net.UDPAddr).AddrPort()
			pc.WriteTo([]byte(b.Name+" "+fa.String()), from)
		}
	}()

	ll, err := b.NS.Listen("tcp", fmt.Sprintf(":%d", HoldPort))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		ll.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ll.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			go func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				if _, err := io.WriteString(c, b.Name+"\n"); err != nil {
					return
				}
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// Reply is what one request learned.
type Reply struct {
	Backend string     // the name the backend answered
	Peer    netip.Addr // the source address the backend saw
}

// dial opens a TCP or UDP socket in ns from src (zero: any source).
func dial(ctx context.Context, ns *netns.NS, network string, src netip.Addr, dst netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{}
		if src.IsValid() {
			if network == "udp" {
				d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			} else {
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
		}
		var err error
		c, err = d.DialContext(ctx, network, dst.String())
		return err
	})
	return c, err
}

// GetHTTP makes one HTTP request on a new connection from the client (from
// src when valid) to dst and returns who answered.
func (topo *Topology) GetHTTP(ctx context.Context, src netip.Addr, dst netip.AddrPort, timeout time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, topo.Client, network, src, dst)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dst.String()+"/", nil)
	if err != nil {
		return Reply{}, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, fmt.Errorf("read reply from %s: %w", dst, err)
	}
	r := Reply{Backend: string(body)}
	if ap, err := netip.ParseAddrPort(resp.Header.Get("X-Remote-Addr")); err == nil {
		r.Peer = ap.Addr().Unmap()
	}
	return r, nil
}

// EchoUDP sends one datagram from a fresh socket (a new conntrack entry,
// so a new scheduling decision) and returns who answered.
func (topo *Topology) EchoUDP(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dial(ctx, topo.Client, "udp", netip.Addr{}, dst)
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	if _, err := c.Write([]byte("ping")); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return Reply{}, fmt.Errorf("udp echo via %s: %w", dst, err)
	}
	name, peer, _ := strings.Cut(string(buf[:n]), " ")
	r := Reply{Backend: name}
	if ap, err := netip.ParseAddrPort(peer); err == nil {
		r.Peer = ap.Addr().Unmap()
	}
	return r, nil
}

// HoldConn is a long-lived connection to the hold server behind a frontend.
type HoldConn struct {
	Backend string
	c       net.Conn
	r       *bufio.Reader
}

// Hold opens a connection to dst and reads the greeting (the backend's name).
func (topo *Topology) Hold(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (*HoldConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dial(ctx, topo.Client, "tcp", netip.Addr{}, dst)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("greeting via %s: %w", dst, err)
	}
	c.SetDeadline(time.Time{})
	return &HoldConn{Backend: strings.TrimSpace(name), c: c, r: r}, nil
}

// HoldFrom is Hold from a fixed source address and port (a flow's whole
// 5-tuple fixed, for schedulers that hash it). Close it with Reset, so the
// same tuple can be opened again at once.
func (topo *Topology) HoldFrom(ctx context.Context, src, dst netip.AddrPort, timeout time.Duration) (*HoldConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var c net.Conn
	err := topo.Client.Do(func() error {
		var err error
		c, err = (&net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(src)}).DialContext(ctx, "tcp", dst.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("greeting via %s from %s: %w", dst, src, err)
	}
	c.SetDeadline(time.Time{})
	return &HoldConn{Backend: strings.TrimSpace(name), c: c, r: r}, nil
}

// Reset closes the held connection with a TCP reset (SO_LINGER 0): no
// TIME_WAIT on the client, and the gateway's state for the tuple is closed,
// so opening the same tuple again is a new connection for the dataplane.
func (h *HoldConn) Reset() error {
	if tc, ok := h.c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	return h.c.Close()
}

// Echo sends a line on the held connection and waits for it to come back.
func (h *HoldConn) Echo(line string, timeout time.Duration) error {
	h.c.SetDeadline(time.Now().Add(timeout))
	defer h.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(h.c, line+"\n"); err != nil {
		return fmt.Errorf("write on held connection to %s: %w", h.Backend, err)
	}
	got, err := h.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("read on held connection to %s: %w", h.Backend, err)
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("held connection to %s echoed %q, want %q", h.Backend, got, line)
	}
	return nil
}

// Close closes the held connection.
func (h *HoldConn) Close() error { return h.c.Close() }

// Tally is requests per backend name ("" counts failures).
type Tally map[string]int

// Total is the number of requests counted, failures included.
func (t Tally) Total() int {
	n := 0
	for _, v := range t {
		n += v
	}
	return n
}

// String renders the tally sorted by name, e.g. "be1=101 be2=99 be3=100".
func (t Tally) String() string {
	var names []string
	for k := range t {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		n := k
		if n == "" {
			n = "failed"
		}
		fmt.Fprintf(&b, "%s=%d", n, t[k])
	}
	return b.String()
}

// Fan runs n requests with some concurrency and counts who answered; every
// reply is passed to check (when non-nil) and the first error is returned
// alongside the tally (failed requests count under "").
func Fan(n, workers int, do func() (Reply, error), check func(Reply) error) (Tally, error) {
	var (
		mu       sync.Mutex
		tally    = Tally{}
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan struct{})
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				r, err := do()
				if err == nil && check != nil {
					err = check(r)
				}
				mu.Lock()
				if err != nil {
					tally[""]++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					tally[r.Backend]++
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return tally, firstErr
}
