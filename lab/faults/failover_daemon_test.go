//go:build failover

package faults

// TestFailoverDaemonKill9: the L2 failover of the real daemon with its
// dataplane — two `edgelb run` processes (nftables, ARP, memberlist) in two
// gateway namespaces on one bridge with a client and a backend; the VIP's
// owner dies (its bridge port down, its daemon killed with -9: a killed
// daemon alone leaves its rules forwarding in the kernel, no outage) and the
// client's requests through the VIP (a new TCP connection each) are timed
// until one succeeds again. EDGELB_FAILOVER_TRIALS sets the trials (5;
// lab/bench.sh: 20). announce/l2's
// TestFailoverTwoGateways times the announcer alone in helper processes;
// this one includes everything the daemon does (start, nftables, the
// engine) and nothing of the test's own making on the traffic path.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
)

// Addresses of the failover lab: one segment (documentation range).
var (
	foClient  = netip.MustParsePrefix("198.51.100.10/24")
	foBackend = netip.MustParseAddrPort("198.51.100.20:8080")
	foVIP     = netip.MustParseAddr("198.51.100.100")
	foGW      = []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("198.51.100.2/24")}
)

const foToken = "edgelb-failover-token"

// foLog is one daemon incarnation's output.
type foLog struct{ logbuf.Buffer }

// owns: the daemon's last word about the VIP was "owning VIP".
func (l *foLog) owns() bool {
	s := l.String()
	return strings.LastIndex(s, "owning VIP") > strings.LastIndex(s, "released VIP")
}

// foGateway is one gateway namespace and its current daemon.
type foGateway struct {
	name string
	ns   *netns.NS
	cfg  string
	mac  net.HardwareAddr
	port string // its bridge port in the segment namespace
	cmd  *exec.Cmd
	done chan struct{}
	log  *foLog
}

// seesAll reports whether g's membership has converged on every other
// gateway of gws: its log's last word on each is "member alive". Seeing one
// member is not enough with three gateways: VIP ownership follows the
// membership, and a gateway joining late moves VIPs that connections were
// already opened through (a soak run saw one reset that way, before any kill).
func (g *foGateway) seesAll(gws []*foGateway) bool {
	out := g.log.String()
	for _, h := range gws {
		if h == g {
			continue
		}
		who := " member=" + h.name + " "
		alive := strings.LastIndex(out, `msg="member alive" announcer=l2`+who)
		gone := strings.LastIndex(out, `msg="member gone" announcer=l2`+who)
		if alive < 0 || gone > alive {
			return false
		}
	}
	return true
}

// stop ends a running daemon with SIGTERM (SIGKILL after 20 s) and, when
// the test failed, logs the last tail lines of its output.
func (g *foGateway) stop(t *testing.T, tail int) {
	if g.running() {
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(20 * time.Second):
			g.cmd.Process.Kill()
			<-g.done
		}
	}
	if t.Failed() && g.log != nil {
		t.Logf("%s log (tail):\n%s", g.name, g.log.Tail(tail))
	}
}

func (g *foGateway) start(t *testing.T, exe string) {
	t.Helper()
	g.log = &foLog{}
	cmd := exec.Command(exe, "run", "--config", g.cfg)
	cmd.Stdout, cmd.Stderr = g.log, g.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := g.ns.Do(cmd.Start); err != nil {
		t.Fatalf("start %s: %v", g.name, err)
	}
	g.cmd, g.done = cmd, make(chan struct{})
	done := g.done
	go func() { cmd.Wait(); close(done) }()
}

func (g *foGateway) running() bool {
	if g.cmd == nil {
		return false
	}
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

func (g *foGateway) kill9(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", g.name, err)
	}
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not reaped 10 s after SIGKILL", g.name)
	}
}

func (g *foGateway) ready() bool {
	c := g.ns.HTTPClient(time.Second)
	resp, err := c.Get("http://127.0.0.1:8080/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func foConfig(i int, dir string) string {
	me, other := foGW[i], foGW[1-i]
	return fmt.Sprintf(`pools:
  - name: seg
    addresses: ["198.51.100.100-198.51.100.110"]
services:
  - name: web
    pool: seg
    vip: %s
    ports: [{port: 80, targetPort: %d}]
    backends: [{address: %q}]
announce:
  l2:
    interface: eth0
    members:
      name: gw%d
      bindAddress: %s
      port: 7946
      join: ["%s:7946"]
      # the failure detection systemd/config.example.yaml ships
      probeInterval: 80ms
      probeTimeout: 40ms
      suspicionMult: 2
dataplane:
  mode: nftables
  nodeAddresses: ["%s"]
api:
  listen: 127.0.0.1:8080
  tokenFile: %s
state:
  dir: %s
`, foVIP, foBackend.Port(), foBackend.Addr().String(), i+1, me.Addr(), other.Addr(), me.Addr(),
		filepath.Join(dir, "token"), filepath.Join(dir, "state"))
}

func foGrep(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "VIP") || strings.Contains(l, "member") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// foNeighAge is how many seconds ago the neighbour entry was updated
// (`ip -s neigh`: used CONFIRMED/USED/UPDATED), -1 if unknown.
func foNeighAge(n *netns.NS, a netip.Addr) int {
	out, err := n.Exec(context.Background(), "ip", "-s", "neigh", "show", a.String(), "dev", "eth0")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "used" && i+1 < len(f) {
			if p := strings.Split(f[i+1], "/"); len(p) == 3 {
				// iproute2 prints "used 3/3/1probes 1": no space.
				if v, err := strconv.Atoi(strings.TrimRight(p[2], "abcdefghijklmnopqrstuvwxyz")); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// other0 is the gateway that is not g.
func other0(gws []*foGateway, g *foGateway) *foGateway {
	for _, o := range gws {
		if o != g {
			return o
		}
	}
	return nil
}

func foWait(limit time.Duration, ok func() bool) bool {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		if ok() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ok()
}

func foEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestFailoverDaemonKill9(t *testing.T) {
	netns.RequireRoot(t)
	// 5 trials in make test-failover (~40 s); lab/bench.sh sets 20.
	trials := foEnvInt("EDGELB_FAILOVER_TRIALS", 5)
	exe := edgelbBinary(t)
	seg := netns.NewT(t, "fos")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(seg.Bridge("br0"))
	attach := func(n *netns.NS, port string, addr netip.Prefix) {
		t.Helper()
		must(netns.Veth(seg, port, n, "eth0"))
		must(seg.SetMaster(port, "br0"))
		must(n.AddAddr("eth0", addr))
	}
	client := netns.NewT(t, "foc")
	attach(client, "cl", foClient)
	backend := netns.NewT(t, "fob")
	attach(backend, "be", netip.PrefixFrom(foBackend.Addr(), 24))
	ln, err := backend.Listen("tcp", foBackend.String())
	must(err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	var gws []*foGateway
	for i := range foGW {
		n := netns.NewT(t, fmt.Sprintf("fog%d", i+1))
		attach(n, fmt.Sprintf("g%d", i+1), foGW[i])
		must(n.Sysctl("net.ipv4.ip_forward", "1"))
		// The gateway forwards out of the interface it received on:
		// no redirect may teach the client a way around the VIP.
		must(n.Sysctl("net.ipv4.conf.all.send_redirects", "0"))
		must(n.Sysctl("net.ipv4.conf.eth0.send_redirects", "0"))
		mac, err := n.MAC("eth0")
		must(err)
		dir := t.TempDir()
		must(os.WriteFile(filepath.Join(dir, "token"), []byte(foToken+"\n"), 0o600))
		cfg := filepath.Join(dir, "config.yaml")
		must(os.WriteFile(cfg, []byte(foConfig(i, dir)), 0o600))
		g := &foGateway{name: fmt.Sprintf("gw%d", i+1), ns: n, cfg: cfg, mac: mac, port: fmt.Sprintf("g%d", i+1)}
		gws = append(gws, g)
	}
	// Registered after the namespaces: runs before they go away.
	t.Cleanup(func() {
		for _, g := range gws {
			g.stop(t, 30)
		}
	})
	for _, g := range gws {
		g.start(t, exe)
	}

	// One request, a new TCP connection each (no keep-alive: a connection
	// to the dead gateway must not be reused).
	hc := &http.Client{Timeout: 100 * time.Millisecond, Transport: &http.Transport{
		DisableKeepAlives: true, DialContext: client.DialContext}}
	url := "http://" + netip.AddrPortFrom(foVIP, 80).String() + "/"
	get := func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && string(b) == "ok\n"
	}
	// clientMAC is the link address the client holds for the VIP.
	clientMAC := func() string {
		out, _ := client.Exec(context.Background(), "ip", "neigh", "show", foVIP.String(), "dev", "eth0")
		return string(out)
	}
	// steady: both daemons ready and members of one cluster, exactly one
	// owner, the client reaching the VIP through the owner's MAC.
	steady := func() (*foGateway, bool) {
		var owner *foGateway
		for _, g := range gws {
			if !g.running() || !g.ready() || !g.seesAll(gws) {
				return nil, false
			}
			if g.log.owns() {
				if owner != nil {
					return nil, false
				}
				owner = g
			}
		}
		if owner == nil || !get() {
			return nil, false
		}
		if !strings.Contains(clientMAC(), owner.mac.String()) {
			// Both gateways forward the VIP (each has the rules), so a
			// client entry on the non-owner still works, and a gratuitous
			// ARP inside the neighbour locktime is ignored: make the
			// client ask again, as one that learnt the owner would have.
			client.Exec(context.Background(), "ip", "neigh", "del", foVIP.String(), "dev", "eth0")
			return nil, false
		}
		return owner, true
	}

	var back, neigh []time.Duration
	for i := 0; i < trials; i++ {
		// A client learnt its entry long ago; one updated less than the
		// neighbour locktime (1 s) ago ignores the new owner's gratuitous
		// ARP (seen: every trial ~1.2 s, the client re-probing). So: a
		// steady state, then no requests (they would refresh the entry)
		// until the entry is 2 s old with the owner unchanged; else again.
		var owner *foGateway
		aged := func() bool {
			var ok bool
			if owner, ok = steady(); !ok {
				return false
			}
			return foWait(5*time.Second, func() bool {
				return owner.log.owns() && !other0(gws, owner).log.owns() &&
					strings.Contains(clientMAC(), owner.mac.String()) && foNeighAge(client, foVIP) >= 2
			})
		}
		if !foWait(90*time.Second, aged) {
			t.Fatalf("trial %d: no steady state (both members, one owner, the VIP answering, the client's entry 2 s old) in 90 s", i+1)
		}
		var other *foGateway
		for _, g := range gws {
			if g != owner {
				other = g
			}
		}
		// The owner's host dies: its link goes down and its daemon is
		// killed. kill -9 alone is no outage — the kernel keeps forwarding
		// through the dead daemon's rules (seen: requests kept succeeding).
		if out, err := seg.Exec(context.Background(), "ip", "link", "set", owner.port, "down"); err != nil {
			t.Fatalf("link down %s: %v: %s", owner.port, err, out)
		}
		t0 := time.Now()
		owner.kill9(t)
		// Requests until one succeeds. The time is the MEASURED figure
		// (goal p99 < 500 ms); a minute bounds a hang — a busy machine
		// delays memberlist's probes and this client alike.
		var ok bool
		var tNeigh time.Duration
		for time.Since(t0) < time.Minute {
			if tNeigh == 0 && strings.Contains(clientMAC(), other.mac.String()) {
				tNeigh = time.Since(t0)
			}
			if get() {
				ok = true
				break
			}
		}
		d := time.Since(t0)
		if !ok {
			t.Fatalf("trial %d: no request through the VIP succeeded within a minute of kill -9 %s", i+1, owner.name)
		}
		if tNeigh == 0 {
			tNeigh = d
		}
		back, neigh = append(back, d), append(neigh, tNeigh)
		if os.Getenv("EDGELB_FAILOVER_DEBUG") != "" {
			time.Sleep(time.Second)
			t.Logf("kill at %s; neigh now %s; %s says:\n%s\n%s said:\n%s", t0.Format("15:04:05.000"), clientMAC(), other.name, foGrep(other.log.String()), owner.name, foGrep(owner.log.String()))
		}
		t.Logf("trial %d: %s down (link, kill -9) → request via %s OK after %s (client neighbour entry %s)", i+1, owner.name, other.name,
			d.Round(time.Millisecond), tNeigh.Round(time.Millisecond))
		if out, err := seg.Exec(context.Background(), "ip", "link", "set", owner.port, "up"); err != nil {
			t.Fatalf("link up %s: %v: %s", owner.port, err, out)
		}
		owner.start(t, exe)
	}
	q := func(xs []time.Duration, p float64) int64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[int(p/100*float64(len(s)-1)+0.5)].Milliseconds()
	}
	t.Logf("MEASURED daemon failover (2 real edgelb daemons, nftables + ARP + memberlist probing every 80 ms as config.example.yaml, the owner's link down and its daemon killed -9): requests through the VIP succeed again n=%d p50=%d ms p99=%d ms max=%d ms (goal p99 < 500 ms); client neighbour entry on the new owner p50=%d ms p99=%d ms; requests every ≤ 100 ms, a new connection each; load %s",
		len(back), q(back, 50), q(back, 99), slices.Max(back).Milliseconds(), q(neigh, 50), q(neigh, 99), netns.Loadavg())
}
