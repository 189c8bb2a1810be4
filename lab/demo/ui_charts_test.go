//go:build ui

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgelb/edgelb/webui/uitest"
)

// TestUIDemoCharts: with the page open on the real daemon in the demo lab,
// the client sends ~20 s of traffic through the VIP; the charts under the
// VIP's table then hold points, and for the VIP and each backend the chart's
// numbers equal the counters of GET /api/v1/stats: base + Σ connections per
// step = total connections, the newest "active" point = current
// connections, base + Σ bytes per step = bytes in + out. Tolerance: none for
// connections (both come from the same aggregates, sampled after the
// traffic stopped); bytes within 0.1 % (a conntrack resync may land between
// the sample and the REST read). It saves docs/screenshot-charts.png.
func TestUIDemoCharts(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Fatal(err)
	}
	lab, _, _ := startLab(t)
	fwd, err := lab.Forward("127.0.0.1:0", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	base := "http://" + fwd.Addr().String()
	frontend := netip.AddrPortFrom(VIP, 80).String()

	b, err := uitest.NewBrowser(t.TempDir(), 1366, 1000, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Open(base + "/"); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	traffic := lab.Run(ctx, "http://"+frontend+"/?sleep=300ms", 20)
	// At least four chart steps (5 s each) with traffic in them.
	if _, err := b.WaitCharts(frontend, `c.length === 3 && c[0].lines.length >= 4 &&
	  c[0].lines[0].values.filter((v) => v > 0).length >= 4`, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	stop()
	counts, errs, _ := traffic.Snapshot()
	t.Logf("client traffic: %s errors=%d", Format(counts), errs)

	// Wait (on the condition, ≤ 60 s) until a step closed after the traffic
	// stopped and the charts agree with the counters.
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		panels, stats, err := readBoth(b, base, frontend)
		if err == nil {
			last, err = compareCharts(panels, stats)
			if err == nil {
				t.Logf("charts match the counters:\n%s", last)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("charts never matched the counters within 60 s: %v\n%s", err, last)
		}
		time.Sleep(250 * time.Millisecond) // polling interval, not synchronisation
	}
	shot := uitest.ShotPath(t, filepath.Join("..", "..", "docs", "screenshot-charts.png"))
	if err := b.Screenshot(shot); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shot); err == nil {
		t.Logf("screenshot: %s (%d bytes)", shot, fi.Size())
	}
}

type statsBackend struct {
	Backend  string `json:"backend"`
	Current  int64  `json:"current"`
	Total    uint64 `json:"total"`
	BytesIn  uint64 `json:"bytesIn"`
	BytesOut uint64 `json:"bytesOut"`
}

type statsVIP struct {
	Frontend string `json:"frontend"`
	Protocol string `json:"protocol"`
	statsBackend
	Backends []statsBackend `json:"backends"`
}

func readBoth(b *uitest.Browser, base, frontend string) ([]uitest.ChartPanel, map[string]statsBackend, error) {
	panels, err := b.Charts(frontend)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.Get(base + "/api/v1/stats")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var all []statsVIP
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		return nil, nil, err
	}
	out := map[string]statsBackend{}
	for _, v := range all {
		if v.Frontend == frontend && v.Protocol == "TCP" {
			out["VIP"] = v.statsBackend
			for _, be := range v.Backends {
				out[be.Backend] = be
			}
		}
	}
	return panels, out, nil
}

// compareCharts checks every line of the three panels against the counters.
func compareCharts(panels []uitest.ChartPanel, stats map[string]statsBackend) (string, error) {
	if len(panels) != 3 {
		return "", fmt.Errorf("%d chart panels, want 3", len(panels))
	}
	var report string
	var firstErr error
	fail := func(format string, a ...any) {
		if firstErr == nil {
			firstErr = fmt.Errorf(format, a...)
		}
	}
	for i, l := range panels[0].Lines {
		s, ok := stats[l.Series]
		if !ok {
			fail("chart line %q not in /api/v1/stats", l.Series)
			continue
		}
		act, byt := panels[1].Lines[i], panels[2].Lines[i]
		var conns, bytes, nonzero uint64
		for _, v := range l.Values {
			conns += v
			if v > 0 {
				nonzero++
			}
		}
		for _, v := range byt.Values {
			bytes += v
		}
		newest := uint64(0)
		if n := len(act.Values); n > 0 {
			newest = act.Values[n-1]
		}
		restBytes := s.BytesIn + s.BytesOut
		report += fmt.Sprintf("  %-18s conns %d+%d=%d (stats %d) · active %d (stats %d) · bytes %d+%d=%d (stats %d) · %d points, %d steps with new conns\n",
			l.Series, l.BaseConns, conns, l.BaseConns+conns, s.Total, newest, s.Current, byt.BaseBytes, bytes, byt.BaseBytes+bytes, restBytes, len(l.Values), nonzero)
		if l.Points != len(l.Values) || act.Series != l.Series || byt.Series != l.Series {
			fail("%s: %d vertices for %d values, panels out of order", l.Series, l.Points, len(l.Values))
		}
		if l.BaseConns+conns != s.Total {
			fail("%s: chart connections %d, stats total %d", l.Series, l.BaseConns+conns, s.Total)
		}
		if int64(newest) != s.Current {
			fail("%s: chart active %d, stats current %d", l.Series, newest, s.Current)
		}
		got := float64(byt.BaseBytes + bytes)
		if d := got - float64(restBytes); d > 0.001*float64(restBytes) || -d > 0.001*float64(restBytes) {
			fail("%s: chart bytes %d, stats %d", l.Series, byt.BaseBytes+bytes, restBytes)
		}
		if conns == 0 || bytes == 0 || nonzero < 2 {
			fail("%s: the chart holds no traffic (%d conns, %d bytes)", l.Series, conns, bytes)
		}
	}
	if len(panels[0].Lines) != len(stats) {
		fail("%d chart lines, %d in stats", len(panels[0].Lines), len(stats))
	}
	return report, firstErr
}
