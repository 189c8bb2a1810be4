// Package forwarding builds the topologies that prove edgelb's forwarding
// methods keep the client's address: direct routing (dr) with the director
// and the backends on one L2 segment, IPIP tunnelling (tunnel) with everyone
// routed, and a backend HTTP server that logs the peer it saw.
//
// Unlike the demo lab, replies here need not pass the director: a router
// namespace sits between the client and the rest, the backends' default route
// is the router, and the router sends the VIP to the director. So whatever
// reply traffic the director sees is reply traffic the method failed to keep
// away from it.
//
//	dr:     client 192.0.2.2 ─ router 192.0.2.1 | bridge lan 198.51.100.1/24 ─ director .2, backends .11, .12, …
//	tunnel: client 192.0.2.2 ─ router ─ director 198.51.100.2/28
//	                                 ─ backend K 198.51.100.(16K+2)/28 (one routed link each)
//	VIP 203.0.113.10 routed by the router to the director.
package forwarding

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/backendsetup"
)

// Lab addresses (documentation ranges only).
var (
	ClientAddr   = netip.MustParseAddr("192.0.2.2")
	RouterClient = netip.MustParseAddr("192.0.2.1")
	DirectorAddr = netip.MustParseAddr("198.51.100.2")
	RouterLAN    = netip.MustParseAddr("198.51.100.1")
	VIP          = netip.MustParseAddr("203.0.113.10")
)

// Port is where every backend's HTTP server listens (all addresses): DR and
// tunnel cannot map ports, so it is also the VIP's port.
const Port = 80

// Lab is a running topology; everything goes when the test ends.
type Lab struct {
	Method   proxy.Method
	Client   *netns.NS
	Router   *netns.NS
	Director *netns.NS
	Backends []*Backend
}

// Backend is one backend namespace with its HTTP server.
type Backend struct {
	Name   string
	NS     *netns.NS
	Addr   netip.Addr
	Server *PeerServer
}

// AddrPort is the backend's address with Port.
func (b *Backend) AddrPort() netip.AddrPort { return netip.AddrPortFrom(b.Addr, Port) }

// New builds the lab for method (dr or tunnel) with n backends, each
// prepared by backendsetup.Apply inside its own namespace exactly as an
// operator's `edgelb backend-setup --apply` would.
func New(t testing.TB, prefix string, method proxy.Method, n int) *Lab {
	t.Helper()
	netns.RequireRoot(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	l := &Lab{Method: method,
		Client:   netns.NewT(t, prefix+"c"),
		Router:   netns.NewT(t, prefix+"r"),
		Director: netns.NewT(t, prefix+"d"),
	}
	r := l.Router
	must(netns.Veth(l.Client, "eth0", r, "cli0"))
	must(l.Client.AddAddr("eth0", netip.PrefixFrom(ClientAddr, 24)))
	must(r.AddAddr("cli0", netip.PrefixFrom(RouterClient, 24)))
	must(l.Client.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), RouterClient))
	must(r.Sysctl("net.ipv4.ip_forward", "1"))

	switch method {
	case proxy.DirectRouting:
		// One L2 segment: a bridge in the router holding the router's, the
		// director's and every backend's link.
		loadModule("bridge")
		must(r.Bridge("lan"))
		must(r.AddAddr("lan", netip.PrefixFrom(RouterLAN, 24)))
		must(netns.Veth(r, "d0", l.Director, "eth0"))
		must(r.SetMaster("d0", "lan"))
		must(l.Director.AddAddr("eth0", netip.PrefixFrom(DirectorAddr, 24)))
		for i := 0; i < n; i++ {
			b := &Backend{Name: fmt.Sprintf("be%d", i+1), NS: netns.NewT(t, fmt.Sprintf("%sb%d", prefix, i+1)),
				Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(11 + i)})}
			link := fmt.Sprintf("b%d", i+1)
			must(netns.Veth(r, link, b.NS, "eth0"))
			must(r.SetMaster(link, "lan"))
			must(b.NS.AddAddr("eth0", netip.PrefixFrom(b.Addr, 24)))
			must(b.NS.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), RouterLAN))
			l.Backends = append(l.Backends, b)
		}
	case proxy.Tunnel:
		// Routed: the director and every backend on links of their own.
		loadModule("ipip")
		must(netns.Veth(r, "d0", l.Director, "eth0"))
		must(r.AddAddr("d0", netip.PrefixFrom(RouterLAN, 28)))
		must(l.Director.AddAddr("eth0", netip.PrefixFrom(DirectorAddr, 28)))
		for i := 0; i < n; i++ {
			base := byte(16 * (i + 1))
			b := &Backend{Name: fmt.Sprintf("be%d", i+1), NS: netns.NewT(t, fmt.Sprintf("%sb%d", prefix, i+1)),
				Addr: netip.AddrFrom4([4]byte{198, 51, 100, base + 2})}
			gw := netip.AddrFrom4([4]byte{198, 51, 100, base + 1})
			link := fmt.Sprintf("b%d", i+1)
			must(netns.Veth(r, link, b.NS, "eth0"))
			must(r.AddAddr(link, netip.PrefixFrom(gw, 28)))
			must(b.NS.AddAddr("eth0", netip.PrefixFrom(b.Addr, 28)))
			must(b.NS.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), gw))
			l.Backends = append(l.Backends, b)
		}
	default:
		t.Fatalf("forwarding lab: method %q: want dr or tunnel", method)
	}
	must(l.Director.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), RouterLAN))
	must(r.AddRoute(netip.PrefixFrom(VIP, 32), DirectorAddr))

	plan := backendsetup.Plan(method, []netip.Addr{VIP})
	for _, b := range l.Backends {
		must(b.NS.Do(func() error { return backendsetup.Apply(plan) }))
		srv, err := StartPeerServer(b.NS, b.Name, fmt.Sprintf("0.0.0.0:%d", Port))
		must(err)
		t.Cleanup(func() { srv.Close() })
		b.Server = srv
	}
	return l
}

// loadModule asks for a module the lab needs (the guest kernel has them as
// modules); a kernel with it built in, or already loaded, needs nothing.
func loadModule(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, "modprobe", "-q", name).Run()
}

// Service is the dataplane service of the lab: VIP:80 over every backend,
// round robin, with the lab's method.
func (l *Lab) Service() proxy.Service {
	s := proxy.Service{Name: "fwd/" + string(l.Method), VIP: VIP, Port: Port, Protocol: proxy.TCP,
		Scheduler: proxy.RoundRobin, Method: l.Method}
	for _, b := range l.Backends {
		s.Backends = append(s.Backends, proxy.Backend{Addr: b.AddrPort(), Weight: 1})
	}
	return s
}

// Get sends one request from the client (a new connection) and returns the
// backend's name and the peer address the backend saw.
func Get(ctx context.Context, client *netns.NS, url string) (name string, peer netip.AddrPort, err error) {
	c := client.HTTPClient(10 * time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", peer, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", peer, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return "", peer, err
	}
	f := strings.Fields(string(body))
	if resp.StatusCode != http.StatusOK || len(f) != 2 {
		return "", peer, fmt.Errorf("GET %s: %s %q", url, resp.Status, body)
	}
	peer, err = netip.ParseAddrPort(f[1])
	return f[0], peer, err
}

// PeerServer is an HTTP server that answers "NAME PEER" and counts the
// source addresses it saw — the backend's own log of who connected.
type PeerServer struct {
	Name string
	srv  *http.Server

	mu    sync.Mutex
	peers map[netip.Addr]int
}

// StartPeerServer listens on addr inside ns.
func StartPeerServer(ns *netns.NS, name, addr string) (*PeerServer, error) {
	ln, err := ns.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("backend %s: listen %s: %w", name, addr, err)
	}
	p := &PeerServer{Name: name, peers: map[netip.Addr]int{}}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peer, _ := netip.ParseAddrPort(r.RemoteAddr)
			p.mu.Lock()
			p.peers[peer.Addr().Unmap()]++
			p.mu.Unlock()
			fmt.Fprintf(w, "%s %s\n", name, peer)
		})}
	go p.srv.Serve(ln)
	return p, nil
}

// Peers returns how many requests came from each source address.
func (p *PeerServer) Peers() map[netip.Addr]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[netip.Addr]int, len(p.peers))
	for k, v := range p.peers {
		out[k] = v
	}
	return out
}

// Close stops the server.
func (p *PeerServer) Close() error { return p.srv.Close() }

// Counter is an nftables rule counting packets that match an expression,
// in a table of its own ("fwdtest") inside one lab namespace, hooked before
// conntrack and IPVS so it sees every packet that arrives.
type Counter struct {
	ns     *netns.NS
	handle string
	Match  string
}

var handleRE = regexp.MustCompile(`# handle (\d+)`)
var packetsRE = regexp.MustCompile(`counter packets (\d+) bytes`)

// NewCounter adds `MATCH counter` to the test table of ns (created on first use).
func NewCounter(ctx context.Context, ns *netns.NS, match string) (*Counter, error) {
	if out, err := ns.Exec(ctx, "nft", "list", "table", "ip", "fwdtest"); err != nil || len(out) == 0 {
		if _, err := ns.Exec(ctx, "nft", "add", "table", "ip", "fwdtest"); err != nil {
			return nil, err
		}
		if _, err := ns.Exec(ctx, "nft", "add", "chain", "ip", "fwdtest", "pre",
			"{ type filter hook prerouting priority -300 ; }"); err != nil {
			return nil, err
		}
	}
	args := append([]string{"-e", "-a", "add", "rule", "ip", "fwdtest", "pre"}, strings.Fields(match)...)
	out, err := ns.Exec(ctx, "nft", append(args, "counter")...)
	if err != nil {
		return nil, err
	}
	m := handleRE.FindStringSubmatch(string(out))
	if m == nil {
		return nil, fmt.Errorf("nft did not echo the rule's handle: %q", out)
	}
	return &Counter{ns: ns, handle: m[1], Match: match}, nil
}

// Packets reads the counter.
func (c *Counter) Packets(ctx context.Context) (uint64, error) {
	out, err := c.ns.Exec(ctx, "nft", "-a", "list", "chain", "ip", "fwdtest", "pre")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasSuffix(strings.TrimSpace(line), "# handle "+c.handle) {
			continue
		}
		m := packetsRE.FindStringSubmatch(line)
		if m == nil {
			return 0, fmt.Errorf("no counter in %q", line)
		}
		return strconv.ParseUint(m[1], 10, 64)
	}
	return 0, fmt.Errorf("rule handle %s gone from %s", c.handle, c.ns.Name)
}
