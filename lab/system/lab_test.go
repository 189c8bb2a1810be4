//go:build system

package system

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// The lab's segments, all documentation ranges: the client segment (VIPs
// and gateways' eth0), the backend segment (eth1, with the floating source
// address the backends route through) and the sync link (eth2).
func front(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 24)
}
func back(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 24)
}
func syncLink(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 24)
}

var floatSrc = back(250).Addr()

const (
	httpPort   = 8080 // the backends' HTTP port (VIP port 80)
	streamPort = 9000 // the backends' long-lived streams (VIP port 9000)
	backends   = 2
)

// lab is the topology: a segment namespace with three bridges, a client,
// the backends, and one namespace per gateway with its machine.
type lab struct {
	t      *testing.T
	seg    *netns.NS
	client *netns.NS
	gws    []*gateway
	tag    string // per-process part of machine names
}

type gateway struct {
	i int
	*machine
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newLab builds the namespaces and the backends; the gateways' machines are
// prepared, not booted.
func newLab(t *testing.T, gateways int) *lab {
	t.Helper()
	netns.RequireRoot(t)
	l := &lab{t: t, tag: fmt.Sprint(os.Getpid() % 100000)}
	l.seg = netns.NewT(t, "esyss")
	for _, br := range []string{"br0", "br1", "br2"} {
		must(t, l.seg.Bridge(br))
	}
	l.client = netns.NewT(t, "esysc")
	l.attach(l.client, "cl", "br0", "eth0", front(10))
	for b := 1; b <= backends; b++ {
		n := netns.NewT(t, fmt.Sprintf("esysb%d", b))
		l.attach(n, fmt.Sprintf("be%d", b), "br1", "eth0", back(20+b))
		must(t, n.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), floatSrc))
		serveBackend(t, n, fmt.Sprintf("backend%d", b), back(20+b).Addr())
	}
	for i := 1; i <= gateways; i++ {
		n := netns.NewT(t, fmt.Sprintf("esysg%d", i))
		l.attach(n, fmt.Sprintf("g%da", i), "br0", "eth0", front(i))
		l.attach(n, fmt.Sprintf("g%db", i), "br1", "eth1", back(i))
		l.attach(n, fmt.Sprintf("g%ds", i), "br2", "eth2", syncLink(i))
		g := &gateway{i: i, machine: newMachine(t, fmt.Sprintf("esys-gw%d-%s", i, l.tag), n)}
		l.gws = append(l.gws, g)
	}
	return l
}

// attach links n to a segment bridge (br0 clients, br1 backends, br2 the
// sync link) through a veth: port on the segment's side, ifname with addr
// in n.
func (l *lab) attach(n *netns.NS, port, br, ifname string, addr netip.Prefix) {
	l.t.Helper()
	must(l.t, netns.Veth(l.seg, port, n, ifname))
	must(l.t, l.seg.SetMaster(port, br))
	must(l.t, n.AddAddr(ifname, addr))
}

// serveBackend answers HTTP with its name on httpPort and streams 64 bytes
// every 50 ms to every connection on streamPort.
func serveBackend(t *testing.T, n *netns.NS, name string, a netip.Addr) {
	hl, err := n.Listen("tcp", netip.AddrPortFrom(a, httpPort).String())
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name+"\n") })}
	go srv.Serve(hl)
	t.Cleanup(func() { srv.Close() })
	sl, err := n.Listen("tcp", netip.AddrPortFrom(a, streamPort).String())
	must(t, err)
	t.Cleanup(func() { sl.Close() })
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 64)
				for {
					c.SetWriteDeadline(time.Now().Add(time.Minute))
					if _, err := c.Write(b); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
	}()
}

// svc is one service of the gateways' config.
type svc struct {
	name string
	vip  string // "" draws from the pool
}

// config renders gateway i's /etc/edgelb/config.yaml; with pair, the other
// gateway is its memberlist peer and conntrackd peer.
func config(i int, pair bool, svcs ...svc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "announce:\n  l2:\n    interface: eth0\n    sourceInterface: eth1\n    sourceAddresses: [%q]\n", floatSrc.String())
	if pair {
		peer := 3 - i
		fmt.Fprintf(&b, "    members: {name: gw%d, bindAddress: %s, port: 7946, join: [\"%s:7946\"]}\n", i, front(i).Addr(), front(peer).Addr())
		fmt.Fprintf(&b, "stateSync:\n  conntrackd: {interface: eth2, peer: %s}\n", syncLink(peer).Addr())
	}
	return render(i, "192.0.2.100-192.0.2.120", b.String(), "", svcs...)
}

// render is gateway i's config: the pool front (addresses), the services,
// rest (YAML sections: announce, stateSync, state), the nftables dataplane,
// the API on loopback (api: more of its fields, as "k: v, ...") and JSON
// logs.
func render(i int, addresses, rest, api string, svcs ...svc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pools:\n  - name: front\n    addresses: [%q]\n", addresses)
	if len(svcs) > 0 {
		b.WriteString("services:\n")
	}
	for _, s := range svcs {
		fmt.Fprintf(&b, "  - name: %s\n    pool: front\n", s.name)
		if s.vip != "" {
			fmt.Fprintf(&b, "    vip: %s\n", s.vip)
		}
		fmt.Fprintf(&b, "    ports: [{name: http, port: 80, targetPort: %d}, {name: stream, port: %d}]\n", httpPort, streamPort)
		b.WriteString("    backends: [")
		for k := 1; k <= backends; k++ {
			if k > 1 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{address: %q}", back(20+k).Addr().String())
		}
		b.WriteString("]\n")
	}
	b.WriteString(rest)
	if api != "" {
		api = ", " + api
	}
	fmt.Fprintf(&b, "dataplane: {mode: nftables, nodeAddresses: [%q]}\napi: {listen: \"127.0.0.1:8080\"%s}\nlog: {format: json}\n", front(i).Addr().String(), api)
	return b.String()
}

// install copies a .deb into the machine and installs it with dpkg.
// --force-confold: the config is the operator's; without a terminal dpkg
// cannot ask about a changed example and would fail.
func (g *gateway) install(deb string) (string, error) {
	g.copyIn(deb, "/root/edgelb.deb")
	return g.run("dpkg", "-i", "--force-confold", "/root/edgelb.deb")
}

// api GETs a path of the gateway's REST API from inside the machine.
func (g *gateway) api(path string, v any) error {
	out, err := g.run("curl", "-sSf", "--max-time", "5", "http://127.0.0.1:8080/api/v1"+path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("%s: GET %s: %w: %.300s", g.name, path, err, out)
	}
	return nil
}

// journal returns the unit's journal entries (journalctl -o json) since the
// machine booted.
func (g *gateway) journal() []map[string]any {
	out, _ := g.run("journalctl", "-b", "-u", "edgelb", "-o", "json", "--no-pager")
	var es []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			es = append(es, e)
		}
	}
	return es
}

// waitFor polls cond every 100 ms until it holds or d passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// traffic: new HTTP connections at a steady rate and long-lived streams
// through a VIP, from the client namespace.
type traffic struct {
	mu       sync.Mutex
	requests int
	failed   int
	errs     []string
	streams  []*stream
	stop     context.CancelFunc
	done     sync.WaitGroup
}

type stream struct {
	mu   sync.Mutex
	c    net.Conn
	last time.Time
	n    int
	err  error
}

func (s *stream) state() (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.err
}

// startTraffic opens nStreams streams to vip:streamPort and requests
// http://vip/ at rate per second, each on a new connection with a 10 s limit
// (a SYN lost in a handover is retransmitted after 1 s and 3 s: slow, not
// failed).
func startTraffic(t *testing.T, client *netns.NS, vip string, rate, nStreams int) *traffic {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{stop: cancel}
	for k := 0; k < nStreams; k++ {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := client.DialContext(dctx, "tcp", net.JoinHostPort(vip, fmt.Sprint(streamPort)))
		dcancel()
		if err != nil {
			cancel()
			t.Fatalf("stream %d to %s: %v", k, vip, err)
		}
		s := &stream{c: c}
		tr.streams = append(tr.streams, s)
		tr.done.Add(1)
		go func() {
			defer tr.done.Done()
			buf := make([]byte, 4096)
			for {
				// A stream that stays silent for 20 s is lost (the
				// backends write every 50 ms).
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				n, err := c.Read(buf)
				s.mu.Lock()
				if err != nil {
					if ctx.Err() == nil {
						s.err = err
					}
					s.mu.Unlock()
					return
				}
				s.n += n
				s.last = time.Now()
				s.mu.Unlock()
			}
		}()
	}
	hc := client.HTTPClient(10 * time.Second)
	tr.done.Add(1)
	go func() {
		defer tr.done.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := get(hc, "http://"+vip+"/")
				tr.mu.Lock()
				tr.requests++
				if err != nil {
					tr.failed++
					if len(tr.errs) < 5 {
						tr.errs = append(tr.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
					}
				}
				tr.mu.Unlock()
			}()
		}
	}()
	return tr
}

func get(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "backend") {
		return fmt.Errorf("GET %s: %d %q", url, resp.StatusCode, body)
	}
	return nil
}

// kept counts the streams that read after since and have not failed.
func (tr *traffic) kept(since time.Time) int {
	k := 0
	for _, s := range tr.streams {
		if last, err := s.state(); err == nil && last.After(since) {
			k++
		}
	}
	return k
}

// finish stops the traffic and closes the streams.
func (tr *traffic) finish() {
	tr.stop()
	for _, s := range tr.streams {
		s.c.Close()
	}
	tr.done.Wait()
}

func (tr *traffic) counts() (requests, failed int, errs []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.requests, tr.failed, append([]string(nil), tr.errs...)
}
