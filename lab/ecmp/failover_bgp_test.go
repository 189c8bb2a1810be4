//go:build bgp

package ecmp

// TestBGPFailover: how long a dead gateway keeps receiving traffic behind a
// BGP/ECMP router, with BFD (300 ms × 3, edgelb's and FRR's default) and
// without (the hold time, 90 s by default). The lab of ecmp_bgp_test.go:
// FRR (bgpd + zebra, and bfdd for the BFD cases) with maximum-paths and an
// L4 multipath hash on packet headers (fib_multipath_hash_policy=1 in the
// router's namespace), N `edgelb run` gateways (nftables, nat-nosnat,
// scheduler mh) announcing one VIP. Per trial: 50 fresh long-lived streams,
// a new connection every 50 ms throughout; one gateway dies (its links set
// down, then kill -9); measured from the moment its links went down:
//
//   - route_gone: until the router's kernel route to the VIP lost that next
//     hop (polled over netlink every 5 ms);
//   - newconn_ok: until new connections work again — when the first attempt
//     of the final all-successful run of attempts completed (an attempt
//     succeeds when its TCP handshake completes within 900 ms: below TCP's
//     1 s SYN retransmission, so a SYN black-holed by the dead gateway
//     counts as a failure rather than a late success);
//   - failed_conns: attempts that failed from the death on (all trials);
//   - kept: streams that still stream 3 s after the route changed (no error,
//     a line received after that moment). With mh and nat-nosnat the
//     streams of the dead gateway continue through the survivors (the same
//     Maglev pick, the backend routes replies by the flow's last link), so
//     every stream can be kept; the line shows the worst trial;
//   - gap: per stream, the longest pause between two lines (the backend
//     writes one every 50 ms); p99 over every stream of every trial.
//
// Targets with BFD: route_gone p99 < 1 s, newconn_ok p99 < 1.2 s (logged as
// MISSED when not met: on a loaded machine FRR's own processing after the
// 600–900 ms detection can push a trial past 1 s); asserted: both below 5 s
// (only BFD can do that; the hold time is 90 s) and kept ≥ 49/50 in every
// trial. The bfd=off baseline runs 3 trials with 2 gateways
// only (each waits the 90 s hold time; the 3-gateway baseline would add
// another 5 minutes and measure the same timer).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	streamsPerTrial = 50
	attemptEvery    = 50 * time.Millisecond
	attemptTimeout  = 900 * time.Millisecond
	failSettle      = 3 * time.Second
)

func TestBGPFailover(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	for _, c := range []struct {
		gateways, trials int
		bfd              bool
	}{{2, 20, true}, {3, 20, true}, {2, 3, false}} {
		name := fmt.Sprintf("gateways=%d-bfd=%v", c.gateways, c.bfd)
		t.Run(name, func(t *testing.T) { runFailover(t, exe, c.gateways, c.trials, c.bfd) })
	}
}

type attempt struct {
	start, end time.Time
	ok         bool
}

// prober opens a new connection to the VIP every 50 ms and records each.
type prober struct {
	mu       sync.Mutex
	attempts []attempt
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (l *lab) startProber() *prober {
	p := &prober{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tk := time.NewTicker(attemptEvery)
		defer tk.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tk.C:
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				a := attempt{start: time.Now()}
				ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
				c, err := l.client.DialContext(ctx, "tcp", netip.AddrPortFrom(vip, 80).String())
				cancel()
				a.end, a.ok = time.Now(), err == nil
				if c != nil {
					c.Close()
				}
				p.mu.Lock()
				p.attempts = append(p.attempts, a)
				p.mu.Unlock()
			}()
		}
	}()
	l.t.Cleanup(func() { p.close() })
	return p
}

func (p *prober) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// since returns the failures among the attempts started from t0 to end,
// and when new connections worked again: the completion of the first
// attempt of the final run of successes (0 when none failed).
func (p *prober) since(t0, end time.Time) (failed int, okAfter time.Duration) {
	p.mu.Lock()
	as := slices.Clone(p.attempts)
	p.mu.Unlock()
	as = slices.DeleteFunc(as, func(a attempt) bool { return a.start.Before(t0) || a.start.After(end) })
	slices.SortFunc(as, func(a, b attempt) int { return a.start.Compare(b.start) })
	lastFail := -1
	for i, a := range as {
		if !a.ok {
			failed++
			lastFail = i
		}
	}
	if lastFail < 0 {
		return 0, 0
	}
	if lastFail+1 >= len(as) {
		return failed, end.Sub(t0) // never recovered within the window
	}
	return failed, as[lastFail+1].end.Sub(t0)
}

// stream is one long-lived connection of a trial.
type stream struct {
	c      net.Conn
	last   atomic.Int64 // unix ns of the last line
	maxGap atomic.Int64 // ns
	mu     sync.Mutex
	err    error
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *stream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// openStreams opens n streams and waits until each received a line.
func (l *lab) openStreams(n int) ([]*stream, func()) {
	l.t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ss []*stream
	closeAll := func() {
		select {
		case <-stop:
			return
		default:
		}
		close(stop)
		for _, s := range ss {
			s.c.Close()
		}
		wg.Wait()
	}
	l.t.Cleanup(closeAll)
	for i := range n {
		nc, err := l.client.DialContext(l.t.Context(), "tcp", netip.AddrPortFrom(vip, 80).String())
		if err != nil {
			l.t.Fatalf("stream %d: %v", i, err)
		}
		s := &stream{c: nc}
		ss = append(ss, s)
		wg.Add(2)
		go func() {
			defer wg.Done()
			r := bufio.NewReader(nc)
			var prev int64
			for {
				if _, err := r.ReadString('\n'); err != nil {
					select {
					case <-stop:
					default:
						s.fail(err)
					}
					return
				}
				now := time.Now().UnixNano()
				if prev != 0 && now-prev > s.maxGap.Load() {
					s.maxGap.Store(now - prev)
				}
				prev = now
				s.last.Store(now)
			}
		}()
		go func() {
			defer wg.Done()
			tk := time.NewTicker(100 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
				}
				nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(nc, "x\n"); err != nil {
					select {
					case <-stop:
					default:
						s.fail(err)
					}
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(keptWait)
	for _, s := range ss {
		for s.last.Load() == 0 && s.failed() == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s.last.Load() == 0 {
			l.t.Fatalf("a new stream got no line within %s (%v)", keptWait, s.failed())
		}
	}
	return ss, closeAll
}

// streamsKept counts the streams without a failure that receive a line
// after the call began (each gets up to keptWait: a busy machine can hold a
// live reader for a second; a dead one never answers).
func streamsKept(ss []*stream) int {
	now := time.Now().UnixNano()
	for end := time.Now().Add(keptWait); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		pending := false
		for _, s := range ss {
			pending = pending || (s.failed() == nil && s.last.Load() < now)
		}
		if !pending {
			break
		}
	}
	n := 0
	for _, s := range ss {
		if s.failed() == nil && s.last.Load() >= now {
			n++
		}
	}
	return n
}

// hasNexthop reads the router's route to the VIP over netlink.
func (l *lab) hasNexthop(gw netip.Addr) (bool, error) {
	rs, err := l.router.Netlink().RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{Dst: &net.IPNet{IP: vip.AsSlice(), Mask: net.CIDRMask(32, 32)}}, netlink.RT_FILTER_DST)
	if err != nil {
		return false, err
	}
	want := net.IP(gw.AsSlice())
	for _, r := range rs {
		if r.Gw.Equal(want) {
			return true, nil
		}
		for _, nh := range r.MultiPath {
			if nh.Gw.Equal(want) {
				return true, nil
			}
		}
	}
	return false, nil
}

// routerBFDUp waits until the router's bfdd has n sessions up.
func (l *lab) routerBFDUp(n int, within time.Duration) {
	l.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		out, err := exec.Command("vtysh", "--vty_socket", l.frrDir, "-d", "bfdd", "-c", "show bfd peers json").Output()
		var ps []struct {
			Peer   string `json:"peer"`
			Status string `json:"status"`
		}
		if err == nil && json.Unmarshal(out, &ps) == nil {
			up := 0
			for _, p := range ps {
				if p.Status == "up" {
					up++
				}
			}
			if up == n {
				return
			}
			last = fmt.Sprintf("%+v", ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.t.Fatalf("router bfdd: not %d sessions up within %s: %s", n, within, last)
}

// kill takes gateway i down as a dying machine would: links first (no
// more packets in or out, so no NOTIFICATION and no BFD AdminDown), then
// the process with SIGKILL.
func (l *lab) kill(i int) time.Time {
	l.t.Helper()
	nl := l.gws[i].Netlink()
	var t0 time.Time
	for _, name := range []string{"eth0", "be"} {
		link, err := nl.LinkByName(name)
		if err != nil {
			l.t.Fatal(err)
		}
		if err := nl.LinkSetDown(link); err != nil {
			l.t.Fatal(err)
		}
		if t0.IsZero() {
			t0 = time.Now() // eth0 (towards the router) is down: traffic to it is lost from here
		}
	}
	p := l.daemons[i]
	p.cmd.Process.Kill()
	<-p.done
	// edgelb's bfdd dies with it (parent-death signal): an orphan would
	// answer for the dead gateway and hold the BFD port against the next.
	deadline := time.Now().Add(10 * time.Second) // a hang guard
	for bfddIn(l.t, l.gws[i]) > 0 {
		if time.Now().After(deadline) {
			l.t.Fatalf("gw%d: bfdd still runs 10 s after edgelb was killed", i+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return t0
}

// bfddIn counts the bfdd processes in a namespace.
func bfddIn(t *testing.T, ns *netns.NS) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Handle()), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, p := range procs {
		comm, err := os.ReadFile(p + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "bfdd" {
			continue
		}
		if link, err := os.Readlink(p + "/ns/net"); err == nil && link == want {
			n++
		}
	}
	return n
}

// revive brings gateway i's links back (the kernel dropped their routes)
// and starts its daemon again.
func (l *lab) revive(i int) {
	l.t.Helper()
	gw := l.gws[i]
	for _, name := range []string{"eth0", "be"} {
		if err := gw.LinkUp(name); err != nil {
			l.t.Fatal(err)
		}
	}
	for _, r := range []struct {
		dst netip.Prefix
		via netip.Addr
	}{{netip.MustParsePrefix("0.0.0.0/0"), routerG.Addr()}, {netip.MustParsePrefix("10.40.0.0/24"), beLink(i, 2).Addr()}} {
		if err := gw.AddRoute(r.dst, r.via); err != nil && !errors.Is(err, syscall.EEXIST) {
			l.t.Fatal(err)
		}
	}
	l.startGateway(i)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(float64(len(s))*p+0.999999) - 1 // nearest rank
	return s[max(0, min(k, len(s)-1))]
}

func runFailover(t *testing.T, exe string, n, trials int, bfd bool) {
	l := newLab(t, exe, "mh", "nat-nosnat", bfd)
	for i := range n {
		l.startGateway(i)
	}
	l.waitNexthops(n, 60*time.Second)
	if bfd {
		l.routerBFDUp(n, 30*time.Second)
	}
	pr := l.startProber()
	var routeGone, newconnOK, gaps []time.Duration
	failed, minKept := 0, streamsPerTrial
	for trial := range trials {
		victim := trial % n
		ss, closeStreams := l.openStreams(streamsPerTrial)
		time.Sleep(500 * time.Millisecond)
		t0 := l.kill(victim)
		var gone time.Duration
		for {
			has, err := l.hasNexthop(gwAddr(victim).Addr())
			if err != nil {
				t.Fatal(err)
			}
			if !has {
				gone = time.Since(t0)
				break
			}
			if time.Since(t0) > 150*time.Second { // a hang guard: 90 s hold time + slack
				t.Fatalf("trial %d: the router still routes to dead gw%d after %s", trial, victim+1, time.Since(t0))
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(failSettle)
		k := streamsKept(ss)
		end := time.Now()
		f, ok := pr.since(t0, end.Add(-attemptTimeout))
		closeStreams()
		for _, s := range ss {
			gaps = append(gaps, time.Duration(s.maxGap.Load()))
		}
		routeGone, newconnOK = append(routeGone, gone), append(newconnOK, ok)
		failed += f
		minKept = min(minKept, k)
		t.Logf("trial %d: gw%d died: route gone after %s, new connections ok after %s, %d failed, kept %d/%d",
			trial, victim+1, gone.Round(time.Millisecond), ok.Round(time.Millisecond), f, k, streamsPerTrial)
		l.revive(victim)
		l.waitNexthops(n, 60*time.Second)
		if bfd {
			l.routerBFDUp(n, 30*time.Second)
		}
	}
	pr.close()
	onoff := map[bool]string{true: "on", false: "off"}[bfd]
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	t.Logf("MEASURED bgp-failover gateways=%d bfd=%s route_gone_p50_ms=%d route_gone_p99_ms=%d newconn_ok_p99_ms=%d failed_conns=%d kept=%d/%d gap_p99_ms=%d",
		n, onoff, ms(percentile(routeGone, 0.5)), ms(percentile(routeGone, 0.99)), ms(percentile(newconnOK, 0.99)), failed,
		minKept, streamsPerTrial, ms(percentile(gaps, 0.99)))
	if !bfd {
		return
	}
	// The targets (issue 35): route gone p99 < 1 s, new connections p99 <
	// 1.2 s. BFD itself takes 600–900 ms (the router's bfdd expires 900 ms
	// after the last packet, which left the gateway 225–300 ms apart); FRR's
	// bfdd → zebra → bgpd → zebra → kernel path takes the rest, which on this
	// shared machine under load was up to ~120 ms — so a target can be
	// missed by chance and is reported, not asserted. Asserted: what only BFD
	// can do (far below the 90 s hold time, with room for a loaded machine)
	// and the streams kept.
	for _, m := range []struct {
		what        string
		p99, target time.Duration
		hangBound   time.Duration
	}{
		{"route_gone", percentile(routeGone, 0.99), time.Second, 5 * time.Second},
		{"newconn_ok", percentile(newconnOK, 0.99), 1200 * time.Millisecond, 5 * time.Second},
	} {
		if m.p99 >= m.target {
			// MEASURED, so the test report shows it.
			t.Logf("MEASURED bgp-failover-target gateways=%d %s_p99_ms=%d target_ms=%d MISSED", n, m.what,
				m.p99.Milliseconds(), m.target.Milliseconds())
		}
		if m.p99 >= m.hangBound {
			t.Errorf("%s p99 %s: BFD did not take the route away (want well below the hold time; < %s)", m.what, m.p99, m.hangBound)
		}
	}
	if minKept < streamsPerTrial-1 {
		t.Errorf("a trial kept %d/%d streams, want ≥ %d", minKept, streamsPerTrial, streamsPerTrial-1)
	}
}
