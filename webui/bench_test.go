package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The stream benchmark runs the server in a child process (this test
// binary re-executed into TestBenchStreamServer) so the CPU it reports is
// the server's alone: the HTTP server, the hub, JSON encoding and the fake
// flow generator standing in for conntrack. The parent is the SSE client
// and measures lag: when a new flow was created → when the client read it.

const benchEnv = "EDGELB_BENCH_STREAM_SERVER"

func benchParams() (rate float64, secs int) {
	rate, secs = 1000, 30
	if v, err := strconv.ParseFloat(os.Getenv("EDGELB_BENCH_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	if v, err := strconv.Atoi(os.Getenv("EDGELB_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	return rate, secs
}

// TestBenchStreamServer is the child side; it does nothing in a normal run.
func TestBenchStreamServer(t *testing.T) {
	if os.Getenv(benchEnv) != "1" {
		t.Skip("child process of BenchmarkStreamNewFlows")
	}
	rate, secs := benchParams()
	m := newFakeManager()
	m.seed(t)
	src := newFakeFlows()
	s, err := New(Options{Manager: m, Flows: src, Listen: "127.0.0.1:0", RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ADDR %s\n", s.Addr())
	waitFor(t, "the client", func() bool { return s.hub.clientCount() > 0 })

	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	gctx, gstop := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
	gen := &flowGen{src: src, frontend: netip.MustParseAddrPort("192.0.2.10:80"), rate: rate, lifetime: 10 * time.Second,
		backends: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.2:8080"), netip.MustParseAddrPort("198.51.100.3:8080"),
			netip.MustParseAddrPort("198.51.100.4:8080")}}
	gen.run(gctx)
	gstop()
	wall := time.Since(t0)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	s.hub.mu.Lock()
	live := len(s.hub.flows)
	s.hub.mu.Unlock()
	fmt.Printf("CPU %d %d %d\n", cpu.Nanoseconds(), wall.Nanoseconds(), live)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	s.Shutdown(sctx)
}

// BenchmarkStreamNewFlows: EDGELB_BENCH_RATE (1000) new flows per second
// for EDGELB_BENCH_SECONDS (30), each living 10 s, through the hub and one
// SSE client. Reports stream lag (flow created → delta read) and the
// server process's CPU as a share of one core. Goals: lag ≤ 1 s, CPU < 5%.
func BenchmarkStreamNewFlows(b *testing.B) {
	rate, secs := benchParams()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchStreamServer$", "-test.v", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), benchEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	var addr string
	for lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "ADDR "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		b.Fatal("child server did not start")
	}
	resultc := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if r, ok := strings.CutPrefix(lines.Text(), "CPU "); ok {
				resultc <- r
			}
		}
		close(resultc)
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var lags []time.Duration
	var deltas, newFlows int
	done := make(chan struct{})
	go func() {
		defer close(done)
		readEvents(bufio.NewReaderSize(resp.Body, 1<<20), func(e sseEvent) {
			if e.event != "delta" {
				return
			}
			var d struct {
				New []struct {
					Start time.Time `json:"start"`
				} `json:"new"`
			}
			if json.Unmarshal([]byte(e.data), &d) != nil {
				return
			}
			deltas++
			for _, f := range d.New {
				lags = append(lags, e.at.Sub(f.Start))
			}
			newFlows += len(d.New)
		})
	}()
	b.ResetTimer()
	res, ok := <-resultc
	b.StopTimer()
	if !ok {
		b.Fatal("child ended without a result")
	}
	time.Sleep(500 * time.Millisecond) // the last batch
	cancel()
	resp.Body.Close()
	<-done
	cmd.Wait()

	var cpuNs, wallNs int64
	var live int
	fmt.Sscan(res, &cpuNs, &wallNs, &live)
	if len(lags) == 0 {
		b.Fatal("no flows streamed")
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	pct := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))] }
	cpuPct := 100 * float64(cpuNs) / float64(wallNs)
	b.ReportMetric(float64(newFlows)/(float64(wallNs)/1e9), "flows/s")
	b.ReportMetric(float64(pct(.5).Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(pct(.99).Microseconds())/1000, "lag-p99-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "lag-max-ms")
	b.ReportMetric(cpuPct, "server-cpu-%core")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	b.Logf("%.0f new flows/s for %ds (%d streamed in %d deltas, %d live at the end): lag p50 %v p99 %v max %v (goal ≤ 1s: %s); "+
		"server CPU %.2f%% of a core (%v over %v; goal < 5%%: %s)",
		rate, secs, newFlows, deltas, live, pct(.5).Round(time.Millisecond), pct(.99).Round(time.Millisecond),
		lags[len(lags)-1].Round(time.Millisecond), verdict(lags[len(lags)-1] <= time.Second),
		cpuPct, time.Duration(cpuNs).Round(time.Millisecond), time.Duration(wallNs).Round(time.Millisecond), verdict(cpuPct < 5))
}
