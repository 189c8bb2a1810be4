//go:build ui

package webui

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/webui/uitest"
)

const scaleServices = 1000

// scaleSpec is service i of the 1,000: svc-0000 … svc-0999, VIP
// 10.1.(i/250).(i%250+1) port 80, three backends 10.2.x.y:8080 (every
// backend address unique, so a filter on one finds one row).
func scaleSpec(i int) lb.ServiceSpec {
	ip := func(a, n int) netip.Addr {
		return netip.AddrFrom4([4]byte{10, byte(a), byte(n / 250), byte(n%250 + 1)})
	}
	s := lb.ServiceSpec{Name: fmt.Sprintf("svc-%04d", i), VIPs: []netip.Addr{ip(1, i)},
		Ports:     []lb.PortSpec{{Name: "http", Port: 80, Protocol: proxy.TCP, TargetPort: 8080}},
		Scheduler: proxy.WeightedRoundRobin, Method: proxy.NAT}
	for k := 0; k < 3; k++ {
		s.Backends = append(s.Backends, lb.BackendSpec{Addr: ip(2, 3*i+k), Weight: 1})
	}
	return s
}

func scaleBackend(i, k int) string { return scaleSpec(i).Backends[k].Addr.String() + ":8080" }

// scaleReporters: what a BGP gateway with BFD, an L2 announcer owning every
// VIP and a state sync with one live and one dead peer report.
func scaleReporters(vips []string) []announce.Reporter {
	now := time.Now()
	q0, q7 := uint64(0), uint64(7)
	return []announce.Reporter{
		fakeReporter{announce.Status{Kind: "bgp", Owned: vips, Peers: []announce.PeerState{
			{Name: "tor1", Address: "198.51.100.254", State: "Established", Since: now.Add(-90 * time.Minute),
				BFD: &announce.BFDState{State: "up", Detect: "300ms x 3", Ups: 2, Downs: 1, RxPackets: 5400, TxPackets: 5410,
					LastDown: now.Add(-91 * time.Minute).Format(time.RFC3339), Diagnostic: "control detection time expired"}},
			{Name: "tor2", Address: "203.0.113.254", State: "Active", Detail: "connect: connection refused",
				BFD: &announce.BFDState{State: "down", Multihop: true, Detect: "300ms x 3", Downs: 3,
					LastDown: now.Add(-20 * time.Second).Format(time.RFC3339), RemoteDiagnostic: "neighbor signaled session down"}},
		}}},
		fakeReporter{announce.Status{Kind: "l2", Owned: vips[:len(vips)-2], Owners: map[string]string{
			vips[len(vips)-2]: "gw-b", vips[len(vips)-1]: "gw-b"}, Peers: []announce.PeerState{
			{Name: "gw-b", Address: "192.0.2.2", State: "alive", LastPacket: now.Add(-300 * time.Millisecond)}}}},
		fakeReporter{announce.Status{Kind: "statesync", Peers: []announce.PeerState{
			{Name: "conntrackd", Address: "udp 192.0.2.1", State: "running", Detail: "backup; 12 own and 840 synced connections"},
			{Name: "sync peer", Address: "192.0.2.2", State: "alive", LastPacket: now.Add(-200 * time.Millisecond), Queue: &q0},
			{Name: "sync peer", Address: "192.0.2.3", State: "dead", LastPacket: now.Add(-42 * time.Second), Queue: &q7,
				Detail: "no sync packet for 42s"},
		}}},
	}
}

// fakeAudit is Options.Audit with fixed entries, newest first.
type fakeAudit []audit.Entry

func (a fakeAudit) Entries(limit int) []audit.Entry { return a[:min(limit, len(a))] }

func someAudit() fakeAudit {
	now := time.Now()
	return fakeAudit{
		{Seq: 3, Time: now, Identity: "ops", Source: "rest", Client: "192.0.2.50", Object: "service/svc-0007", Action: "update",
			Before: "10.1.0.8:80 → 3 backends", After: "10.1.0.8:80 → 3 backends (one weight 0)"},
		{Seq: 2, Time: now.Add(-time.Minute), Identity: "SIGHUP", Source: "reload", Object: "pool/big", Action: "create"},
		{Seq: 1, Time: now.Add(-2 * time.Minute), Identity: "start-up", Source: "config", Object: "pool/default", Action: "create"},
	}
}

// TestUIScale1000: the page with 1,000 services (plus "web") in chromium.
// It logs first-contentful-paint, when the overview first had rows, one
// render's time and the page height (MEASURED: browser timings stretch on a
// busy machine); asserts that the page stays short with the default page
// size, that the filter narrows rows (by service and by backend), that the
// column headers sort, that a row click shows that VIP's backends, and that
// the header counts services, VIPs and backends. Saves
// docs/screenshot-1000.png with EDGELB_SCREENSHOTS=docs.
func TestUIScale1000(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Skip(err)
	}
	m := newFakeManager()
	m.seed(t)
	ctx := context.Background()
	if _, err := m.CreatePool(ctx, lb.Pool{Name: "big", Ranges: []lb.Range{mustRange("10.1.0.0/16")}}); err != nil {
		t.Fatal(err)
	}
	vips := []string{"192.0.2.10"}
	for i := 0; i < scaleServices; i++ {
		if _, _, err := m.PutService(ctx, scaleSpec(i)); err != nil {
			t.Fatal(err)
		}
		vips = append(vips, scaleSpec(i).VIPs[0].String())
	}
	// svc-0007 has one backend failing its check: 2/3 up.
	hs := newFakeHealth("svc-0007", scaleBackend(7, 0), scaleBackend(7, 1), scaleBackend(7, 2))
	hs.set(scaleBackend(7, 2), false, "tcp connect: connection refused")
	src := newFakeFlows()
	_, ts := startServer(t, m, func(o *Options) {
		o.Flows = src
		o.BatchInterval = 100 * time.Millisecond
		o.Health = hs.list
		o.Audit = someAudit()
		o.Reporters = scaleReporters(vips)
	})
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	busy := netip.AddrPortFrom(scaleSpec(500).VIPs[0], 80) // traffic on "web" and on svc-0500
	var bb []netip.AddrPort
	for k := 0; k < 3; k++ {
		bb = append(bb, netip.MustParseAddrPort(scaleBackend(500, k)))
	}
	go (&flowGen{src: src, frontend: busy, backends: bb, rate: 30, lifetime: 4 * time.Second}).run(gctx)
	go (&flowGen{src: src, frontend: netip.MustParseAddrPort("192.0.2.10:80"), rate: 10, lifetime: 4 * time.Second,
		backends: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.2:8080"), netip.MustParseAddrPort("198.51.100.3:8080")}}).run(gctx)

	b := newPage(t)
	start := time.Now()
	if err := b.Open(ts.URL + "/"); err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	// The header: services, VIPs, backends up/total, all counted (3,003
	// backends, one failing its check: the health poll lands within 2 s).
	o, err := b.WaitOverview(`o.rows.length === 25 && o.count === '(1,001)' && o.summary.includes('3,002/3,003 backends up')`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := b.Timings()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURED ui-1000 first_paint_ms=%.0f summary_rows_ms=%.0f render_ms=%.1f page_height_px=%d summary_rows=%d services=%d load_ms=%d",
		tm.FirstContentfulPaint, tm.SummaryRows, tm.Render, o.PageHeight, len(o.Rows), scaleServices+1, loaded.Milliseconds())
	t.Logf("header: %q; pager: %q; section heights (px): %v", o.Summary, o.Pager, o.Sections)
	for _, want := range []string{"1,001 services", "1,001 VIPs (", "3,002/3,003 backends up", "1 backend down"} {
		if !strings.Contains(o.Summary, want) {
			t.Errorf("header %q lacks %q", o.Summary, want)
		}
	}
	if o.PageHeight >= 3000 {
		t.Errorf("page is %d px tall with the default page size (25 rows), want < 3,000", o.PageHeight)
	}
	if o.Pager != "rows 1–25 of 1,001, page 1 of 41" || o.Sort["vip"] != "ascending" {
		t.Errorf("pager %q, sort %v", o.Pager, o.Sort)
	}
	if r := row(o, "10.1.0.8:80/TCP"); r == nil || r.Backends != "2/3" || !strings.HasPrefix(r.Service, "svc-0007") {
		t.Errorf("svc-0007 row %+v, want 2/3 backends up", r)
	}

	// Filter: by service name, by a backend address, then nothing.
	if err := b.Filter("svc-012"); err != nil {
		t.Fatal(err)
	}
	o, err = b.WaitOverview(`o.count === '(10 of 1,001 match)' && o.rows.length === 10`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range o.Rows {
		if !strings.HasPrefix(r.Service, "svc-012") {
			t.Errorf("filter svc-012 kept %+v", r)
		}
	}
	if err := b.Filter(scaleBackend(123, 1)); err != nil {
		t.Fatal(err)
	}
	if o, err = b.WaitOverview(`o.rows.length === 1 && o.rows[0].service.startsWith('svc-0123')`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("filter %s: %d row (%s), count %q", scaleBackend(123, 1), len(o.Rows), o.Rows[0].VIP, o.Count)

	// A row click shows that VIP's backends (and a second one hides them).
	key := o.Rows[0].Key
	frontend := strings.TrimSuffix(key, "/TCP")
	if err := b.ClickRow(key); err != nil {
		t.Fatal(err)
	}
	if o, err = b.WaitOverview(`o.details.length === 1 && o.details[0] === `+strconv.Quote(frontend), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	v, err := b.VIP(frontend)
	if err != nil || len(v.Rows) != 3 || v.Rows[1].Backend != scaleBackend(123, 1) || !strings.Contains(v.Caption, "svc-0123") {
		t.Fatalf("detail of %s: %+v %v", frontend, v, err)
	}
	t.Logf("row click: detail of %s with backends %s, %s, %s", frontend, v.Rows[0].Backend, v.Rows[1].Backend, v.Rows[2].Backend)
	if err := b.ClickRow(key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitOverview(`o.details.length === 0`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Filter("no-such-service"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitOverview(`o.rows.length === 0 && o.count === '(0 of 1,001 match)'`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Filter(""); err != nil {
		t.Fatal(err)
	}

	// Sort: service A→Z, then Z→A; connections biggest first.
	if err := b.SortBy("service"); err != nil {
		t.Fatal(err)
	}
	o, err = b.WaitOverview(`o.sort.service === 'ascending' && o.rows.length === 25`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if names := services(o); !sort.StringsAreSorted(names) || names[0] != "svc-0000" {
		t.Errorf("service ascending: %v", names)
	}
	if err := b.SortBy("service"); err != nil {
		t.Fatal(err)
	}
	o, err = b.WaitOverview(`o.sort.service === 'descending' && o.rows.length === 25`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if names := services(o); !sort.IsSorted(sort.Reverse(sort.StringSlice(names))) || names[0] != "web" || names[1] != "svc-0999" {
		t.Errorf("service descending: %v", names)
	}
	if err := b.SortBy("conns"); err != nil {
		t.Fatal(err)
	}
	// Both busy VIPs lead once both have live connections (one read: the
	// order and the numbers come from the same render).
	o, err = b.WaitOverview(`o.sort.conns === 'descending' && +o.rows[1].conns.replace(/,/g, '') > 0`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var conns []int
	for _, r := range o.Rows {
		n, _ := strconv.Atoi(strings.ReplaceAll(r.Conns, ",", ""))
		conns = append(conns, n)
	}
	if !sort.IsSorted(sort.Reverse(sort.IntSlice(conns))) || conns[2] != 0 {
		t.Errorf("connections descending: %v", conns)
	}
	lead := map[string]bool{o.Rows[0].Key: true, o.Rows[1].Key: true}
	if !lead[busy.String()+"/TCP"] || !lead["192.0.2.10:80/TCP"] {
		t.Errorf("busy VIPs not first: %v", o.Rows[:3])
	}
	t.Logf("sorted by connections: %s %s, %s %s, then %s", o.Rows[0].VIP, o.Rows[0].Conns, o.Rows[1].VIP, o.Rows[1].Conns, o.Rows[2].Conns)

	checkAnnouncements(t, b)
	checkAudit(t, b)

	// The screenshot: busiest first, the busiest VIP's detail open.
	if err := b.ClickRow(o.Rows[0].Key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitOverview(`o.details.length === 1`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	shot := uitest.ShotPath(t, filepath.Join("..", "docs", "screenshot-1000.png"))
	if err := b.Screenshot(shot); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shot); err == nil {
		t.Logf("screenshot: %s (%d bytes)", shot, fi.Size())
	}
	stop()
}

func row(o uitest.Overview, key string) *uitest.SummaryRow {
	for i := range o.Rows {
		if o.Rows[i].Key == key {
			return &o.Rows[i]
		}
	}
	return nil
}

// services: the first name of each row's Service cell ("svc-0001 · wrr").
func services(o uitest.Overview) []string {
	var out []string
	for _, r := range o.Rows {
		out = append(out, strings.Fields(r.Service)[0])
	}
	return out
}

// checkAnnouncements: the BGP table shows each session's BFD state, the L2
// table how many VIPs this gateway owns, the state-sync table a dead peer
// as dead with the age of its last packet.
func checkAnnouncements(t *testing.T, b *uitest.Browser) {
	t.Helper()
	type ann struct {
		BGP  [][]string `json:"bgp"`
		L2   [][]string `json:"l2"`
		Sync [][]string `json:"sync"`
		Cnt  []string   `json:"cnt"`
	}
	read := func(id string) string {
		return `[...document.querySelectorAll('#` + id + ` tbody tr')].map((r) => [...r.children].map((c) => c.textContent))`
	}
	a, err := uitest.Eval[ann](b, `({ bgp: `+read("bgp-table")+`, l2: `+read("l2-table")+`, sync: `+read("sync-table")+`,
	  cnt: [document.querySelector('#bgp-count').textContent, document.querySelector('#sync-count').textContent] })`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("announcements: bgp %q; l2 %q; sync %q; counts %q", a.BGP, a.L2[0][:2], a.Sync, a.Cnt)
	if len(a.BGP) != 2 || a.BGP[0][4] != "up" || a.BGP[0][5] != "300ms x 3" || a.BGP[0][6] != "2/1" ||
		a.BGP[1][4] != "down" || a.BGP[1][5] != "300ms x 3 multihop" || !strings.Contains(a.BGP[1][7], "neighbor signaled session down") {
		t.Errorf("BGP table %q", a.BGP)
	}
	if len(a.L2) != 1 || !strings.HasPrefix(a.L2[0][1], "999 VIPs") ||
		!strings.Contains(a.L2[0][2], "gw-b 192.0.2.2 (alive, last heard ") || !strings.HasSuffix(a.L2[0][2], "owns 2 VIPs)") {
		t.Errorf("L2 table %q", a.L2)
	}
	if len(a.Sync) != 3 || a.Sync[1][2] != "alive" || a.Sync[2][2] != "dead" || !strings.HasSuffix(a.Sync[2][3], " ago") ||
		a.Sync[2][4] != "7" || a.Cnt[1] != "(1 of 2 peers alive)" || a.Cnt[0] != "(1 of 2 established)" {
		t.Errorf("sync table %q, counts %q", a.Sync, a.Cnt)
	}
}

// checkAudit: the audit panel lists the trail, newest first.
func checkAudit(t *testing.T, b *uitest.Browser) {
	t.Helper()
	rows, err := uitest.Eval[[][]string](b, `[...document.querySelectorAll('#audit-table tbody tr')].map((r) => [...r.children].map((c) => c.textContent))`)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][1] != "ops" || rows[0][4] != "service/svc-0007" || rows[1][1] != "SIGHUP" || rows[2][1] != "start-up" {
		t.Errorf("audit table %q", rows)
	}
}
