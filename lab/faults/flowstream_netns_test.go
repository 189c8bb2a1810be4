//go:build netns

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsFlowStream: the live flow stream measured end to end on the
// real daemon — new TCP connections from the client namespace through a
// real nft VIP at EDGELB_FLOW_RATE (1,000) per second for
// EDGELB_FLOW_SECONDS (5 in make test-netns; lab/bench.sh sets 30), the
// daemon's own conntrack FlowSource (ctnetlink events in the gateway
// namespace) and its SSE stream (/api/v1/events) read by one client. Lag is
// the kernel's conntrack start timestamp → the client read the flow in a
// "delta" event (same machine, same realtime clock); CPU is the whole
// daemon's over the window, as a share of one core.
func TestNetnsFlowStream(t *testing.T) {
	rate := envInt("EDGELB_FLOW_RATE", 1000)
	secs := envInt("EDGELB_FLOW_SECONDS", 5)
	e := newEnv(t, "fls", 3)
	web := e.webService()
	e.start(e.config(cfgOpts{Services: []svcDef{web}}))
	e.waitReady(2 * time.Minute)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+apiListen+"/api/v1/events", nil)
	sse := e.lab.Gateway.HTTPClient(0)
	resp, err := sse.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %s", resp.Status)
	}
	var lags []time.Duration
	var streamed atomic.Int64
	read := make(chan struct{})
	go func() {
		defer close(read)
		r := bufio.NewReaderSize(resp.Body, 1<<20)
		var ev string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "event:"):
				ev = strings.TrimSpace(line[len("event:"):])
			case strings.HasPrefix(line, "data:") && ev == "delta":
				at := time.Now()
				var d struct {
					New []struct {
						Start time.Time `json:"start"`
					} `json:"new"`
				}
				if json.Unmarshal([]byte(strings.TrimSpace(line[len("data:"):])), &d) == nil {
					for _, f := range d.New {
						lags = append(lags, at.Sub(f.Start))
					}
					streamed.Add(int64(len(d.New)))
				}
			case line == "":
				ev = ""
			}
		}
	}()
	// The stream follows conntrack events from the first client on; a
	// connection through the VIP shows when that has begun.
	if _, ok := waitFor(30*time.Second, 100*time.Millisecond, func() bool {
		e.connectOnce(web.VIP.As4(), web.Port)
		return streamed.Load() > 0
	}); !ok {
		t.Fatal("no flow streamed within 30 s of connecting through the VIP")
	}
	// The window: connections paced at rate/s on one thread in the client
	// namespace (closed with RST: each a new conntrack entry, none lingers).
	cpu0, base := procCPU(e.d.PID()), streamed.Load()
	t0 := time.Now()
	sent := 0
	err = e.lab.Client.Do(func() error {
		interval := time.Second / time.Duration(rate)
		for sent < rate*secs {
			if d := time.Until(t0.Add(time.Duration(sent) * interval)); d > 0 {
				time.Sleep(d)
			}
			if err := connectRST(web.VIP.As4(), web.Port); err != nil {
				return err
			}
			sent++
		}
		return nil
	})
	wall := time.Since(t0)
	cpu := procCPU(e.d.PID()) - cpu0
	if err != nil {
		t.Fatal(err)
	}
	// Wait for every flow, or until the count has not moved for 5 s (a
	// busy machine delays the daemon and this reader, it does not stop
	// them; 5 minutes bound a hang). Some do not come as "new" in a delta
	// (first run: 63 of 5,000 missing — a finding for webui/proxy/conntrack,
	// reported in the figure); fewer than half means the stream is broken.
	last, moved := streamed.Load(), time.Now()
	waitFor(5*time.Minute, 50*time.Millisecond, func() bool {
		if n := streamed.Load(); n != last {
			last, moved = n, time.Now()
		}
		return last-base >= int64(sent) || time.Since(moved) > 5*time.Second
	})
	if got := streamed.Load() - base; got < int64(sent)/2 {
		t.Errorf("streamed %d of %d new flows; none more in the 5 s after the last (%s after the last connect)", got, sent, time.Since(t0.Add(wall)).Round(time.Millisecond))
	}
	cancel()
	resp.Body.Close()
	<-read
	if len(lags) == 0 {
		t.Fatal("no flow streamed")
	}
	s := slices.Clone(lags)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))].Round(time.Millisecond) }
	share := 100 * cpu.Seconds() / wall.Seconds()
	t.Logf("MEASURED flow stream (real conntrack events in the gateway namespace → the daemon's FlowSource → SSE): %d new flows/s for %s (%d connects through the VIP, %d streamed as new): lag p50 %v p99 %v max %v (goal ≤ 1 s); daemon CPU %.2f%% of a core (%v; goal < 5%%); load %s",
		rate, wall.Round(time.Millisecond), sent, len(lags), p(.5), p(.99), s[len(s)-1].Round(time.Millisecond), share, cpu.Round(time.Millisecond), netns.Loadavg())
}

// connectOnce connects through a VIP from the client namespace.
func (e *env) connectOnce(vip [4]byte, port uint16) {
	e.lab.Client.Do(func() error { return connectRST(vip, port) })
}

// connectRST opens one TCP connection and resets it.
func connectRST(addr [4]byte, port uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	tv := unix.Timeval{Sec: 3}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	sa := &unix.SockaddrInet4{Port: int(port), Addr: addr}
	err = unix.Connect(fd, sa)
	for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EALREADY) {
		err = unix.Connect(fd, sa)
	}
	if err != nil && !errors.Is(err, unix.EISCONN) {
		return fmt.Errorf("connect %v:%d: %w", addr, port, err)
	}
	return nil
}
