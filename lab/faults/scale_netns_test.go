//go:build netns

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/netns"
)

// target is one path to time: its i-th connect goes to addrs[i%len(addrs)]
// (the direct path cycles over the backends a VIP balances over, so both
// paths end in the same mix of backend namespaces and caches).
type target []netip.AddrPort

// connectTimes measures TCP connect (SYN sent → SYN/ACK received, as the
// blocking connect(2) sees it) from the client namespace to each target,
// n times each, interleaved (a, b, b, a, ...) so machine noise hits both
// alike. Each socket is closed with RST (SO_LINGER 0): no TIME_WAIT piles up.
func (e *env) connectTimes(n int, targets ...target) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(targets))
	once := func(ap netip.AddrPort) (time.Duration, error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, err
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
			return 0, err
		}
		tv := unix.Timeval{Sec: 3}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			return 0, err
		}
		sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
		t0 := time.Now()
		// A blocking connect interrupted by a signal (the Go runtime's
		// preemption) is still in progress: wait for it rather than fail.
		err = unix.Connect(fd, sa)
		for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EALREADY) {
			err = unix.Connect(fd, sa)
		}
		if err != nil && !errors.Is(err, unix.EISCONN) {
			return 0, fmt.Errorf("connect %s: %w", ap, err)
		}
		return time.Since(t0), nil
	}
	// One OS thread inside the client namespace does every connect.
	err := e.lab.Client.Do(func() error {
		for i := 0; i < n; i++ {
			for j := range targets {
				k := j
				if i%2 == 1 {
					k = len(targets) - 1 - j
				}
				d, err := once(targets[k][i%len(targets[k])])
				if err != nil {
					return err
				}
				out[k] = append(out[k], d)
			}
		}
		return nil
	})
	return out, err
}

func pct(xs []time.Duration, p float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// metric reads one series from the daemon's /metrics: its name with the
// labels as the exposition prints them (`name{k="v"}`), 0 if absent.
func (e *env) metric(name string) float64 {
	code, body := e.rest(http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		return 0
	}
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// rounds times the targets in r rounds of n interleaved connects each and
// returns every connect per target (pooled) and each round's p50 ratio of
// every target against the last one (the direct path). Rounds show the
// drift between runs of the same thing, which on this 2-core VM is larger
// than the differences measured.
func (e *env) rounds(r, n int, targets ...target) (pooled [][]time.Duration, ratios [][]float64) {
	e.t.Helper()
	pooled = make([][]time.Duration, len(targets))
	ratios = make([][]float64, len(targets))
	if _, err := e.connectTimes(100, targets...); err != nil { // ARP, caches
		e.t.Fatal(err)
	}
	for range r {
		e.flushConntrack()
		times, err := e.connectTimes(n, targets...)
		if err != nil {
			e.t.Fatal(err)
		}
		d := us(pct(times[len(times)-1], 50))
		for i := range times {
			pooled[i] = append(pooled[i], times[i]...)
			ratios[i] = append(ratios[i], us(pct(times[i], 50))/d)
		}
	}
	return pooled, ratios
}

// flushConntrack empties the gateway's connection table. The client's
// ephemeral ports wrap after ~28,000 connects; a SYN whose tuple still has
// an entry (a reset connection stays tracked for 10 s) makes the kernel
// kill and recreate that entry and re-check the NAT tuple against it,
// which is not a first packet. Each round starts clean instead.
func (e *env) flushConntrack() {
	if out, err := e.lab.Gateway.Exec(context.Background(), "conntrack", "-F"); err != nil {
		e.t.Fatalf("conntrack -F: %v: %s", err, out)
	}
}

// span formats the smallest and largest of per-round ratios.
func span(xs []float64) string {
	return fmt.Sprintf("%.3f–%.3f", slices.Min(xs), slices.Max(xs))
}

// TestNetnsFirstPacketLatency: TCP connect time from the client through
// edgelb's VIPs against straight to a backend through a plain router
// beside the gateway (routed, no NAT, no edgelb hook: hookFreePath), with
// 10 and then 10,000 services programmed: p50 ratio, goal ≤ 1.05. Two VIPs over the same backends: method nat (DNAT +
// masquerade, the default) and nat-nosnat (DNAT only: LVS-NAT's way; the
// backends see the client and route their replies through the gateway, as
// the lab's do). With 10,000 it also reports the daemon's memory (VmRSS,
// goal < 100 MiB) after a cold start. Then the kernel's own floor on the
// same gateway without edgelb (natFloor). EDGELB_CONNECTS sets the connects
// per target and round (default 2,000), EDGELB_ROUNDS the rounds (5).
func TestNetnsFirstPacketLatency(t *testing.T) {
	n := envInt("EDGELB_CONNECTS", 2000)
	r := envInt("EDGELB_ROUNDS", 5)
	big := envInt("EDGELB_FAULT_SERVICES", 10000)
	e := newEnv(t, "flp", 3)
	// The client routes the backends' subnet via the gateway (viaGW below).
	if err := e.lab.Client.AddRoute(netip.MustParsePrefix("198.51.100.0/24"), demo.GatewayFront.Addr()); err != nil {
		t.Fatal(err)
	}
	web := e.webService()
	vip := target{netip.AddrPortFrom(web.VIP, web.Port)}
	keep := web
	keep.Name, keep.VIP, keep.Method, keep.NodePort = "web-nosnat", netip.MustParseAddr("192.0.2.101"), "nat-nosnat", 0
	vipKeep := target{netip.AddrPortFrom(keep.VIP, keep.Port)}
	// viaGW crosses the gateway, and so edgelb's hooks (prerouting and
	// postrouting chains, conntrack): kept as a figure. The baseline is
	// direct, a path beside the gateway with no hook (hookFreePath).
	var viaGW target
	for _, b := range e.lab.Backends {
		viaGW = append(viaGW, b.Addr)
	}
	direct := e.hookFreePath()
	for _, count := range []int{10, big} {
		svcs := append([]svcDef{web, keep}, e.bulkServices(count-2, 0)...)
		if e.d != nil {
			if err := e.d.Stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		e.start(e.config(cfgOpts{Services: svcs}))
		e.waitReady(5 * time.Minute)
		if _, ok := waitFor(5*time.Minute, 50*time.Millisecond, func() bool { return vipCount(e.lab.Gateway) == len(svcs) }); !ok {
			t.Fatalf("%d services never programmed", len(svcs))
		}
		conv := time.Since(t0)
		e.converged(fmt.Sprintf("%d services", count), svcs)
		cpu := procCPU(e.d.PID())
		// Memory with a few services too: the floor the binary itself
		// costs (its mapped code is RssFile), against which 10,000 weigh.
		time.Sleep(2 * time.Second) // let start-up garbage be collected
		st, err := procStatus(e.d.PID(), "VmRSS", "VmHWM", "RssAnon", "RssFile")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("MEASURED daemon memory with %d services: VmRSS %.1f MiB (goal < 100 MiB), peak VmHWM %.1f MiB; Go heap in use %.1f MiB, Go runtime total from the OS %.1f MiB; RssAnon %.1f MiB, RssFile %.1f MiB (the mapped executable); cold start to converged %s, daemon CPU %s; load %s",
			len(svcs), float64(st["VmRSS"])/1024, float64(st["VmHWM"])/1024, e.metric("go_memstats_heap_inuse_bytes")/(1<<20),
			e.metric("go_memstats_sys_bytes")/(1<<20), float64(st["RssAnon"])/1024, float64(st["RssFile"])/1024,
			conv.Round(time.Millisecond), cpu, netns.Loadavg())
		times, ratios := e.rounds(r, n, vip, vipKeep, viaGW, direct)
		v, k, g, d := times[0], times[1], times[2], times[3]
		t.Logf("MEASURED first packet with %d services, method nat (DNAT + masquerade): connect via VIP p50 %.1f µs p90 %.1f µs p99 %.1f µs; direct to the backend p50 %.1f µs p90 %.1f µs p99 %.1f µs (a plain router beside the gateway: no edgelb hook, no conntrack on the path); p50 ratio %.3f (goal ≤ 1.05; rounds %s) over %d×%d connects each; straight through the gateway (its edgelb hooks crossed, no NAT) p50 %.1f µs, ratio %.3f (rounds %s); load %s",
			len(svcs), us(pct(v, 50)), us(pct(v, 90)), us(pct(v, 99)), us(pct(d, 50)), us(pct(d, 90)), us(pct(d, 99)),
			us(pct(v, 50))/us(pct(d, 50)), span(ratios[0]), r, n, us(pct(g, 50)), us(pct(g, 50))/us(pct(d, 50)), span(ratios[2]), netns.Loadavg())
		t.Logf("MEASURED first packet with %d services, method nat-nosnat (DNAT only): connect via VIP p50 %.1f µs p90 %.1f µs p99 %.1f µs; p50 ratio %.3f (goal ≤ 1.05; rounds %s) against the same direct path",
			len(svcs), us(pct(k, 50)), us(pct(k, 90)), us(pct(k, 99)), us(pct(k, 50))/us(pct(d, 50)), span(ratios[1]))
		if count == big {
			// Memory again after the connects: steady state with traffic,
			// polls and resyncs running.
			st, err := procStatus(e.d.PID(), "VmRSS", "VmHWM")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("MEASURED daemon memory with %d services after %d connects: VmRSS %.1f MiB (goal < 100 MiB), peak VmHWM %.1f MiB; Go heap in use %.1f MiB",
				len(svcs), 3*(r*n+100), float64(st["VmRSS"])/1024, float64(st["VmHWM"])/1024, e.metric("go_memstats_heap_inuse_bytes")/(1<<20))
		}
	}
	e.natFloor(r, n, viaGW, direct)
}

// natFloor measures the least NAT the kernel can do on the same gateway,
// with edgelb stopped (which removes its tables): two VIPs over the same backends,
// each one hand-written dnat rule (what `iptables -t nat` users write), one
// of them also masqueraded. A floor's ratio is what any NAT load balancer
// can at best meet in this lab (edgelb's rules sit in the same hooks and
// cost every new connection, the direct ones too, their lookups).
func (e *env) natFloor(r, n int, viaGW, direct target) {
	t := e.t
	if err := e.d.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A stopped daemon removes its tables; make sure.
	if out, err := e.lab.Gateway.Exec(context.Background(), "nft", "list", "tables"); err != nil || strings.Contains(string(out), "edgelb") {
		t.Fatalf("gateway tables after stopping edgelb: %v: %s", err, out)
	}
	floor := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.201"), 80)
	floorKeep := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.202"), 80)
	mac, err := e.lab.Gateway.MAC(e.lab.FrontIf)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody answers ARP for these VIPs: pin the neighbours.
	for _, a := range []netip.Addr{floor.Addr(), floorKeep.Addr()} {
		if out, err := e.lab.Client.Exec(context.Background(), "ip", "neigh", "replace", a.String(), "lladdr", mac.String(), "dev", "eth0", "nud", "permanent"); err != nil {
			t.Fatalf("ip neigh: %v: %s", err, out)
		}
	}
	// Spread over the same backends as edgelb's VIPs (as iptables' "-m
	// statistic --mode nth" would), so every path ends in the same
	// backend namespaces.
	var spread []string
	for i, b := range viaGW {
		spread = append(spread, fmt.Sprintf("%d : %s . %d", i, b.Addr(), b.Port()))
	}
	ruleset := fmt.Sprintf(`table ip natfloor {
	chain pre { type nat hook prerouting priority dstnat; ip daddr { %s, %s } tcp dport %d dnat ip to numgen inc mod %d map { %s }; }
	chain post { type nat hook postrouting priority srcnat; ct original ip daddr %s masquerade; }
}
`, floor.Addr(), floorKeep.Addr(), floor.Port(), len(viaGW), strings.Join(spread, ", "), floor.Addr())
	cmd := e.lab.Gateway.Command(context.Background(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	times, ratios := e.rounds(r, n, target{floor}, target{floorKeep}, viaGW, direct)
	f, k, g, d := us(pct(times[0], 50)), us(pct(times[1], 50)), us(pct(times[2], 50)), us(pct(times[3], 50))
	t.Logf("MEASURED kernel NAT floor (edgelb stopped, its tables deleted; one hand-written dnat rule): p50 connect via a dnat+masquerade VIP %.1f µs, via a dnat-only VIP %.1f µs, direct %.1f µs (beside the gateway); ratios %.3f (rounds %s) and %.3f (rounds %s); %d×%d connects each; straight through the hook-less gateway p50 %.1f µs, ratio %.3f (rounds %s); load %s",
		f, k, d, f/d, span(ratios[0]), k/d, span(ratios[1]), r, n, g, g/d, span(ratios[2]), netns.Loadavg())
}
