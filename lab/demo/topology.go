// Package demo builds the demo lab — a client, a gateway and three HTTP
// backends, each in its own network namespace — shared by the lab tool
// `edgelb-demo` (cmd/edgelb-demo, `make demo`), the end-to-end tests and
// the browser test.
//
//	client 192.0.2.10/24 ──veth── 192.0.2.1/24 gateway 198.51.100.1/24 ══bridge══ backend-1..3 198.51.100.11..13
//	                   VIP pool 192.0.2.100-192.0.2.120 (same L2 segment: the client ARPs for the VIP)
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// Addresses of the lab (documentation ranges only).
var (
	ClientAddr   = netip.MustParsePrefix("192.0.2.10/24")
	GatewayFront = netip.MustParsePrefix("192.0.2.1/24")
	GatewayBack  = netip.MustParsePrefix("198.51.100.1/24")
	PoolRange    = "192.0.2.100-192.0.2.120"
	VIP          = netip.MustParseAddr("192.0.2.100")
	BackendPort  = uint16(8080)
	NodePort     = uint16(30080)
)

// Lab is a running topology. Close removes every namespace (and with them
// every link) it created.
type Lab struct {
	Client   *netns.NS
	Gateway  *netns.NS
	Backends []*Backend
	// FrontIf is the gateway's interface facing the client (where VIPs are announced).
	FrontIf string

	closers []func() error
}

// Backend is one HTTP server answering its name.
type Backend struct {
	Name string
	NS   *netns.NS
	Addr netip.AddrPort

	mu    sync.Mutex
	peers map[string]int // remote addresses seen, for SNAT checks
	srv   *http.Server
}

// Peers returns how many requests came from each source address.
func (b *Backend) Peers() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.peers))
	for k, v := range b.peers {
		out[k] = v
	}
	return out
}

// Options tune the lab.
type Options struct {
	// Prefix names the namespaces (prefix-client, prefix-gw, prefix-be1...). Default "edgelb-demo".
	Prefix   string
	Backends int // default 3
}

// New builds the lab. On error everything created so far is removed.
func New(opts Options) (_ *Lab, err error) {
	if opts.Prefix == "" {
		opts.Prefix = "edgelb-demo"
	}
	if opts.Backends == 0 {
		opts.Backends = 3
	}
	l := &Lab{FrontIf: "front0"}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	mk := func(suffix string) (*netns.NS, error) {
		n, err := netns.New(opts.Prefix + "-" + suffix)
		if err != nil {
			return nil, err
		}
		l.closers = append(l.closers, n.Close)
		return n, nil
	}
	if l.Client, err = mk("client"); err != nil {
		return nil, err
	}
	if l.Gateway, err = mk("gw"); err != nil {
		return nil, err
	}
	gw, cl := l.Gateway, l.Client
	if err = netns.Veth(cl, "eth0", gw, l.FrontIf); err != nil {
		return nil, err
	}
	if err = cl.AddAddr("eth0", ClientAddr); err != nil {
		return nil, err
	}
	if err = gw.AddAddr(l.FrontIf, GatewayFront); err != nil {
		return nil, err
	}
	if err = gw.Bridge("back0"); err != nil {
		return nil, err
	}
	if err = gw.AddAddr("back0", GatewayBack); err != nil {
		return nil, err
	}
	if err = gw.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Backends; i++ {
		name := fmt.Sprintf("backend-%d", i)
		n, err := mk(fmt.Sprintf("be%d", i))
		if err != nil {
			return nil, err
		}
		gwEnd := fmt.Sprintf("be%d", i)
		if err := netns.Veth(gw, gwEnd, n, "eth0"); err != nil {
			return nil, err
		}
		if err := gw.SetMaster(gwEnd, "back0"); err != nil {
			return nil, err
		}
		addr := netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)})
		if err := n.AddAddr("eth0", netip.PrefixFrom(addr, 24)); err != nil {
			return nil, err
		}
		// Replies to un-SNATed traffic (nat-nosnat) need the way back.
		if err := n.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), GatewayBack.Addr()); err != nil {
			return nil, err
		}
		b := &Backend{Name: name, NS: n, Addr: netip.AddrPortFrom(addr, BackendPort), peers: map[string]int{}}
		if err := b.start(); err != nil {
			return nil, err
		}
		l.closers = append(l.closers, b.srv.Close)
		l.Backends = append(l.Backends, b)
	}
	return l, nil
}

func (b *Backend) start() error {
	ln, err := b.NS.Listen("tcp", b.Addr.String())
	if err != nil {
		return fmt.Errorf("backend %s: %w", b.Name, err)
	}
	b.srv = &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			b.mu.Lock()
			b.peers[host]++
			b.mu.Unlock()
			if d := r.URL.Query().Get("sleep"); d != "" {
				if dur, err := time.ParseDuration(d); err == nil && dur < time.Minute {
					time.Sleep(dur)
				}
			}
			io.WriteString(w, b.Name+"\n")
		}),
	}
	go b.srv.Serve(ln)
	return nil
}

// Close removes everything the lab created, in reverse order.
func (l *Lab) Close() error {
	var errs []error
	for i := len(l.closers) - 1; i >= 0; i-- {
		if err := l.closers[i](); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	l.closers = nil
	return errors.Join(errs...)
}

// Get sends one request from the client namespace and returns the backend's name.
func (l *Lab) Get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}
