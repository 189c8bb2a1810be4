//go:build netns

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// iperfPort is where iperf3 -s listens in the first backend namespace.
const iperfPort = 5201

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// wrk runs wrk from the client namespace and returns requests/s; close
// sends `Connection: close` (a new TCP connection per request).
func (e *env) wrk(url string, secs int, close bool) float64 {
	e.t.Helper()
	args := []string{"-t1", "-c8", fmt.Sprintf("-d%ds", secs), "--timeout", "5s"}
	if close {
		args = append(args, "-H", "Connection: close")
	}
	out, err := e.lab.Client.Exec(context.Background(), "wrk", append(args, url)...)
	if err != nil {
		e.t.Fatalf("wrk %s: %v: %s", url, err, out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		e.t.Fatalf("wrk %s: no Requests/sec in:\n%s", url, out)
	}
	if bad := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)|Socket errors: .*`).Find(out); bad != nil {
		e.t.Errorf("wrk %s: %s", url, bad)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// iperf runs one iperf3 client from the client namespace: Gbit/s received.
func (e *env) iperf(to netip.AddrPort, secs int) float64 {
	e.t.Helper()
	out, err := e.lab.Client.Exec(context.Background(), "iperf3", "-c", to.Addr().String(), "-p", strconv.Itoa(int(to.Port())),
		"-t", strconv.Itoa(secs), "-J")
	if err != nil {
		e.t.Fatalf("iperf3 -c %s: %v: %s", to, err, out)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.End.SumReceived.BitsPerSecond == 0 {
		e.t.Fatalf("iperf3 -c %s: %v: %s", to, err, out)
	}
	return r.End.SumReceived.BitsPerSecond / 1e9
}

// TestNetnsThroughput: requests/s (wrk, keep-alive and `Connection: close`)
// and TCP Gbit/s (iperf3) through edgelb's VIP against the same backends
// through the hook-free router beside the gateway (hookFreePath), with 10
// and with EDGELB_FAULT_SERVICES (10,000) services programmed; each pair
// run back to back. EDGELB_THROUGHPUT_SECONDS is each run's length (2 s
// for make test-netns; lab/bench.sh sets 10).
func TestNetnsThroughput(t *testing.T) {
	secs := envInt("EDGELB_THROUGHPUT_SECONDS", 2)
	big := envInt("EDGELB_FAULT_SERVICES", 10000)
	for _, tool := range []string{"wrk", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (lab/deps.sh netns installs it): %v", tool, err)
		}
	}
	e := newEnv(t, "thr", 3)
	direct := e.hookFreePath()
	srv := e.lab.Backends[0].NS.Command(context.Background(), "iperf3", "-s", "-p", strconv.Itoa(iperfPort))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	web := e.webService()
	ip := svcDef{Name: "iperf", Pool: "demo", VIP: netip.MustParseAddr("192.0.2.102"), Port: iperfPort,
		Backends: []beDef{{netip.AddrPortFrom(e.lab.Backends[0].Addr.Addr(), iperfPort), 1}}}
	vipURL := fmt.Sprintf("http://%s:%d/", web.VIP, web.Port)
	directURL := fmt.Sprintf("http://%s/", direct[0])
	for _, count := range []int{10, big} {
		svcs := append([]svcDef{web, ip}, e.bulkServices(count-2, 0)...)
		if e.d != nil {
			if err := e.d.Stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		e.start(e.config(cfgOpts{Services: svcs}))
		e.waitReady(5 * time.Minute)
		if _, ok := waitFor(5*time.Minute, 50*time.Millisecond, func() bool { return vipCount(e.lab.Gateway) == len(svcs) }); !ok {
			t.Fatalf("%d services never programmed", len(svcs))
		}
		ka, kaD := e.wrk(vipURL, secs, false), e.wrk(directURL, secs, false)
		cl, clD := e.wrk(vipURL, secs, true), e.wrk(directURL, secs, true)
		gb, gbD := e.iperf(netip.AddrPortFrom(ip.VIP, iperfPort), secs), e.iperf(netip.AddrPortFrom(direct[0].Addr(), iperfPort), secs)
		t.Logf("MEASURED throughput with %d services: wrk keep-alive %.0f req/s via VIP, %.0f direct, ratio %.3f; wrk Connection: close %.0f req/s via VIP, %.0f direct, ratio %.3f; iperf3 %.2f Gbit/s via VIP, %.2f direct, ratio %.3f (%d s each, 8 connections, 1 wrk thread; direct = the hook-free router beside the gateway); load %s",
			len(svcs), ka, kaD, ka/kaD, cl, clD, cl/clD, gb, gbD, gb/gbD, secs, netns.Loadavg())
	}
}
