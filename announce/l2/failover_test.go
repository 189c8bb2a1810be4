//go:build failover

package l2

// Failover in namespaces: N gateways and a client on a bridge (the bridge in
// its own namespace), each gateway a separate PROCESS (this test binary
// re-executed inside the gateway's namespace, see helperMain) so that
// kill -9 is real. Each gateway runs the L2 announcer with the real ARP and
// NDP responders and an HTTP server on every VIP (VIPs on lo with
// arp_ignore=1/arp_announce=2, so only the responders speak for them).

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/announce/arp"
	"github.com/edgelb/edgelb/announce/ndp"
	"github.com/edgelb/edgelb/lab/netns"
	"golang.org/x/sys/unix"
)

const helperEnv = "EDGELB_L2_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// mono is CLOCK_MONOTONIC, comparable across the processes of this test.
func mono() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// eventResponder wraps a real responder and reports every change of
// ownership on stdout with its monotonic time: a claim is stamped before the
// responder may answer, a release after it has stopped, so the intervals
// printed contain every moment the gateway could answer.
type eventResponder struct {
	Responder
	mu    *sync.Mutex
	owned map[netip.Addr]bool
}

func (e *eventResponder) SetOwned(addrs []netip.Addr) error {
	next := setOf(addrs)
	e.mu.Lock()
	for _, a := range sortedAddrs(next) {
		if !e.owned[a] {
			fmt.Printf("EV %d claim %s\n", mono(), a)
		}
	}
	e.mu.Unlock()
	err := e.Responder.SetOwned(addrs)
	e.mu.Lock()
	for _, a := range sortedAddrs(e.owned) {
		if !next[a] {
			fmt.Printf("EV %d release %s\n", mono(), a)
		}
	}
	e.owned = next
	e.mu.Unlock()
	return err
}

// goneHandler also reports "member gone" on stdout with its monotonic time,
// so the test can tell a real death (the process had been killed) from a
// false one (a live, starved gateway declared dead).
type goneHandler struct{ slog.Handler }

func (h goneHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "member gone" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "member" {
				fmt.Printf("GONE %d %s\n", mono(), a.Value.String())
			}
			return true
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h goneHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return goneHandler{h.Handler.WithAttrs(as)}
}
func (h goneHandler) WithGroup(g string) slog.Handler { return goneHandler{h.Handler.WithGroup(g)} }

// helperMain is one gateway, inside its namespace. Configuration comes from
// the environment; it runs until SIGKILL (the test) or SIGTERM (withdraw).
func helperMain() int {
	name, ifName := os.Getenv("L2H_NAME"), os.Getenv("L2H_IF")
	bind := netip.MustParseAddrPort(os.Getenv("L2H_BIND"))
	var join []netip.AddrPort
	for _, j := range strings.Split(os.Getenv("L2H_JOIN"), ",") {
		if j != "" {
			join = append(join, netip.MustParseAddrPort(j))
		}
	}
	var vips []announce.VIP
	for _, v := range strings.Split(os.Getenv("L2H_VIPS"), ",") {
		vips = append(vips, announce.VIP{Addr: netip.MustParseAddr(v)})
	}
	level := slog.LevelInfo
	if os.Getenv("L2H_DEBUG") == "1" {
		level = slog.LevelDebug
	}
	log := slog.New(goneHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})}).With("gw", name)
	fail := func(err error) int { log.Error("helper", "err", err); return 1 }

	var mu sync.Mutex
	ar, err := arp.New(arp.Config{Interface: ifName, Logger: log})
	if err != nil {
		return fail(err)
	}
	nr, err := ndp.New(ndp.Config{Interface: ifName, Logger: log})
	if err != nil {
		return fail(err)
	}
	a, err := New(Config{Interface: ifName, Logger: log,
		ARP:     &eventResponder{Responder: ar, mu: &mu, owned: map[netip.Addr]bool{}},
		NDP:     &eventResponder{Responder: nr, mu: &mu, owned: map[netip.Addr]bool{}},
		Members: &Members{Name: name, Bind: bind, Join: join}})
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	for _, v := range vips {
		l, err := net.Listen("tcp", netip.AddrPortFrom(v.Addr, 80).String())
		if err != nil {
			return fail(err)
		}
		go srv.Serve(l)
	}
	if err := a.SetVIPs(context.Background(), vips); err != nil {
		return fail(err)
	}
	fmt.Printf("UP %d\n", mono())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	a.Close(true)
	return 0
}

// --- the lab ---------------------------------------------------------------

type gateway struct {
	name string
	ns   *netns.NS
	ip   netip.Addr
	mac  net.HardwareAddr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
	gone time.Duration // mono time it was reaped
}

type flab struct {
	t        *testing.T
	br, cl   *netns.NS
	gws      []*gateway
	vips     []netip.Addr
	clientIP netip.Addr
	client6  netip.Addr
	clMAC    net.HardwareAddr

	mu     sync.Mutex
	events []ownEvent // every claim/release of every gateway process
	gone   []goneEvent
	lives  map[string][][2]time.Duration // gateway → [start, reaped) of each process
	stderr map[string]*strings.Builder
}

type goneEvent struct {
	at       time.Duration
	by, whom string
}

// falseDeaths lists "member gone" verdicts on a gateway whose process was
// running at the time (and was not about to be reaped: 50 ms of slack).
func (l *flab) falseDeaths() []goneEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []goneEvent
	for _, e := range l.gone {
		for _, life := range l.lives[e.whom] {
			if e.at > life[0] && (life[1] == 0 || e.at < life[1]-50*time.Millisecond) {
				out = append(out, e)
			}
		}
	}
	return out
}

func (e goneEvent) String() string {
	return fmt.Sprintf("%s declared %s dead while it ran", e.by, e.whom)
}

// overlap is a claim of a VIP while another gateway held it (the logs).
type overlap struct {
	vip     netip.Addr
	gw      string
	holders []string
}

func (o overlap) String() string {
	return fmt.Sprintf("%s claimed by %s while %v held it", o.vip, o.gw, o.holders)
}

// explainedBy: the claimer had declared a holder dead while that holder
// ran (a false death), which is what makes a survivor claim a live
// gateway's VIP.
func (o overlap) explainedBy(fd []goneEvent) bool {
	for _, d := range fd {
		if d.by == o.gw && slices.Contains(o.holders, d.whom) {
			return true
		}
	}
	return false
}

type ownEvent struct {
	at    time.Duration
	gw    string
	vip   netip.Addr
	claim bool
}

var (
	clientIP4 = netip.MustParseAddr("192.0.2.2")
	clientIP6 = netip.MustParseAddr("2001:db8::2")
)

// pickVIPs chooses, for the given member names, one IPv4 and one IPv6 VIP
// owned by each gateway (rendezvous is deterministic), so every kill takes
// VIPs of both families over.
func pickVIPs(names []string) (v4, v6 []netip.Addr) {
	for _, base := range []string{"192.0.2.100", "2001:db8::100"} {
		got := map[string]netip.Addr{}
		a := netip.MustParseAddr(base)
		for len(got) < len(names) {
			if o := ownerOf(a, names); !got[o].IsValid() {
				got[o] = a
			}
			a = a.Next()
		}
		for _, n := range names {
			if a := got[n]; a.Is4() {
				v4 = append(v4, a)
			} else {
				v6 = append(v6, a)
			}
		}
	}
	return v4, v6
}

func newFLab(t *testing.T, n int) *flab {
	t.Helper()
	netns.RequireRoot(t)
	l := &flab{t: t, clientIP: clientIP4, client6: clientIP6, stderr: map[string]*strings.Builder{}, lives: map[string][][2]time.Duration{}}
	l.br = netns.NewT(t, "elb-fbr")
	l.cl = netns.NewT(t, "elb-fcl")
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("gw%d", i))
	}
	v4, v6 := pickVIPs(names)
	l.vips = append(v4, v6...)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	all := []*netns.NS{l.br, l.cl}
	for i, name := range names {
		g := &gateway{name: name, ns: netns.NewT(t, "elb-f"+name+"-"),
			ip: netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i + 1)})}
		l.gws = append(l.gws, g)
		all = append(all, g.ns)
	}
	for _, ns := range all {
		for _, k := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
			must(ns.Sysctl(k, "0"))
		}
	}
	must(l.br.Bridge("br0"))
	must(netns.Veth(l.br, "pcl", l.cl, "cl0"))
	must(l.br.SetMaster("pcl", "br0"))
	must(l.cl.AddAddr("cl0", netip.PrefixFrom(l.clientIP, 24)))
	must(l.cl.AddAddr("cl0", netip.PrefixFrom(l.client6, 64)))
	var err error
	l.clMAC, err = l.cl.MAC("cl0")
	must(err)
	for i, g := range l.gws {
		port := fmt.Sprintf("p%s", g.name)
		must(netns.Veth(l.br, port, g.ns, "g0"))
		must(l.br.SetMaster(port, "br0"))
		must(g.ns.AddAddr("g0", netip.PrefixFrom(g.ip, 24)))
		must(g.ns.AddAddr("g0", netip.PrefixFrom(netip.MustParseAddr(fmt.Sprintf("2001:db8::%d", 10+i+1)), 64)))
		for _, v := range l.vips {
			must(g.ns.AddAddr("lo", netip.PrefixFrom(v, v.BitLen())))
		}
		// Only the responder may speak for the VIPs: the kernel must not
		// answer ARP for the VIPs on lo (arp_ignore) nor use a VIP as the
		// sender of its own ARP requests (arp_announce), which would
		// rewrite the client's entry behind the announcer's back.
		for _, k := range []string{"net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.g0.arp_ignore"} {
			must(g.ns.Sysctl(k, "1"))
		}
		for _, k := range []string{"net.ipv4.conf.all.arp_announce", "net.ipv4.conf.g0.arp_announce"} {
			must(g.ns.Sysctl(k, "2"))
		}
		g.mac, err = g.ns.MAC("g0")
		must(err)
	}
	t.Cleanup(func() {
		for _, g := range l.gws {
			l.kill(g)
		}
		if dir := os.Getenv("EDGELB_FAILOVER_LOGS"); dir != "" {
			// Keep every gateway's log for a post-mortem.
			l.mu.Lock()
			for n, b := range l.stderr {
				os.WriteFile(fmt.Sprintf("%s/%s-%d-%s.log", dir, t.Name(), len(l.gws), n), []byte(b.String()), 0o644)
			}
			l.mu.Unlock()
		}
		if t.Failed() {
			l.mu.Lock()
			for n, b := range l.stderr {
				t.Logf("--- %s stderr (last 3000 bytes):\n%s", n, tail(b.String(), 3000))
			}
			l.mu.Unlock()
		}
	})
	return l
}

// count counts the gateways' stderr lines containing s.
func (l *flab) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.stderr {
		n += strings.Count(b.String(), s)
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (l *flab) names() []string {
	var out []string
	for _, g := range l.gws {
		out = append(out, g.name)
	}
	return out
}

func (l *flab) gw(name string) *gateway {
	for _, g := range l.gws {
		if g.name == name {
			return g
		}
	}
	return nil
}

// start runs the gateway process in its namespace.
func (l *flab) start(g *gateway) {
	l.t.Helper()
	var join []string
	for _, o := range l.gws {
		if o != g {
			join = append(join, netip.AddrPortFrom(o.ip, DefaultPort).String())
		}
	}
	var vips []string
	for _, v := range l.vips {
		vips = append(vips, v.String())
	}
	cmd := exec.Command("ip", "netns", "exec", g.ns.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "L2H_NAME="+g.name, "L2H_IF=g0",
		"L2H_BIND="+netip.AddrPortFrom(g.ip, DefaultPort).String(), "L2H_JOIN="+strings.Join(join, ","),
		"L2H_VIPS="+strings.Join(vips, ","))
	if os.Getenv("EDGELB_FAILOVER_LOGS") != "" {
		cmd.Env = append(cmd.Env, "L2H_DEBUG=1")
	}
	// If this test dies, its gateways die with it (ip netns exec execs the
	// helper in place, so the death signal reaches the helper itself).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	started := mono()
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	g.cmd, g.done = cmd, make(chan struct{})
	l.mu.Lock()
	life := len(l.lives[g.name])
	l.lives[g.name] = append(l.lives[g.name], [2]time.Duration{started, 0})
	if l.stderr[g.name] == nil {
		l.stderr[g.name] = &strings.Builder{}
	}
	sb := l.stderr[g.name]
	l.mu.Unlock()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			l.mu.Lock()
			sb.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "GONE" {
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				l.mu.Lock()
				l.gone = append(l.gone, goneEvent{time.Duration(ns), g.name, f[2]})
				l.mu.Unlock()
				continue
			}
			if len(f) != 4 || f[0] != "EV" {
				continue
			}
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			l.mu.Lock()
			l.events = append(l.events, ownEvent{time.Duration(ns), g.name, netip.MustParseAddr(f[3]), f[2] == "claim"})
			l.mu.Unlock()
		}
	}()
	go func() {
		readers.Wait()
		cmd.Wait()
		g.gone = mono()
		// The dead process answers nothing from now on: close its intervals.
		l.mu.Lock()
		l.lives[g.name][life][1] = g.gone
		for _, v := range l.ownedByLocked(g.name) {
			l.events = append(l.events, ownEvent{g.gone, g.name, v, false})
		}
		l.mu.Unlock()
		close(g.done)
	}()
}

// kill sends SIGKILL to the gateway process and waits until it is reaped.
func (l *flab) kill(g *gateway) time.Duration {
	if g.cmd == nil {
		return 0
	}
	t0 := mono()
	g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.done
	g.cmd = nil
	return t0
}

// ownedByLocked replays the events into the VIPs gw answers for now.
func (l *flab) ownedByLocked(gw string) []netip.Addr {
	own := map[netip.Addr]bool{}
	for _, e := range l.events {
		if e.gw == gw {
			own[e.vip] = e.claim
		}
	}
	return sortedAddrs(own)
}

// owners maps each VIP to the gateways answering for it now.
func (l *flab) owners() map[netip.Addr][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[netip.Addr][]string{}
	for _, g := range l.gws {
		for _, v := range l.ownedByLocked(g.name) {
			out[v] = append(out[v], g.name)
		}
	}
	return out
}

// waitOwners waits until each VIP is answered by exactly its rendezvous owner among names.
func (l *flab) waitOwners(names []string, timeout time.Duration) (time.Duration, error) {
	t0 := mono()
	for {
		own := l.owners()
		bad := ""
		for _, v := range l.vips {
			if want := ownerOf(v, names); !slices.Equal(own[v], []string{want}) {
				bad = fmt.Sprintf("%s answered by %v, want %s", v, own[v], want)
				break
			}
		}
		if bad == "" {
			return mono() - t0, nil
		}
		if mono()-t0 > timeout {
			return 0, fmt.Errorf("ownership not converged after %v: %s", timeout, bad)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// overlaps replays all events: intervals of two gateways answering for one VIP.
func (l *flab) overlaps(from, to time.Duration) []overlap {
	l.mu.Lock()
	evs := slices.Clone(l.events)
	l.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b ownEvent) int { return cmp.Compare(a.at, b.at) })
	holders := map[netip.Addr]map[string]bool{}
	var bad []overlap
	for _, e := range evs {
		h := holders[e.vip]
		if h == nil {
			h = map[string]bool{}
			holders[e.vip] = h
		}
		if !e.claim {
			delete(h, e.gw)
			continue
		}
		h[e.gw] = true
		if len(h) > 1 && e.at >= from && e.at <= to {
			var who []string
			for g := range h {
				who = append(who, g)
			}
			bad = append(bad, overlap{vip: e.vip, gw: e.gw, holders: slices.Sorted(slices.Values(who))})
		}
	}
	return bad
}

// TestFailoverOverlapExplained: the run's split-brain judgement excuses an
// overlap only when its claimer had declared a holder dead while it ran.
func TestFailoverOverlapExplained(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.103")
	o := overlap{vip: vip, gw: "gw3", holders: []string{"gw2", "gw3"}}
	for _, tc := range []struct {
		fd   []goneEvent
		want bool
	}{
		{nil, false},
		{[]goneEvent{{by: "gw3", whom: "gw2"}}, true},
		{[]goneEvent{{by: "gw2", whom: "gw3"}}, false}, // the holder's verdict on the claimer explains nothing
		{[]goneEvent{{by: "gw1", whom: "gw2"}}, false},
		{[]goneEvent{{by: "gw1", whom: "gw2"}, {by: "gw3", whom: "gw2"}}, true},
	} {
		if got := o.explainedBy(tc.fd); got != tc.want {
			t.Errorf("%s with false deaths %v: explained %v, want %v", o, tc.fd, got, tc.want)
		}
	}
}
