// Package uitest drives edgelb's page in Debian's chromium (headless, over
// the DevTools pipe, via chromedp) for the ui-tagged browser tests: the
// webui package's own test against fakes, and the lead's run against the
// demo lab. It never downloads a browser: it uses /usr/bin/chromium.
package uitest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium (apt-get install chromium fonts-liberation).
const ChromiumPath = "/usr/bin/chromium"

// Browser is one headless chromium with one tab.
type Browser struct {
	ctx         context.Context
	cancelAlloc context.CancelFunc
	cancelTab   context.CancelFunc
}

// Available reports why chromium cannot run here, or nil.
func Available() error {
	if _, err := os.Stat(ChromiumPath); err != nil {
		return fmt.Errorf("%s missing (lab/deps.sh ui installs chromium): %w", ChromiumPath, err)
	}
	return nil
}

// NewBrowser starts chromium with a throwaway profile in userDataDir and a
// laptop-sized window. logf receives the page's console messages and errors.
func NewBrowser(userDataDir string, width, height int, logf func(string, ...any)) (*Browser, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath),
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(width, height),
	)
	// No timeout on the parent: a deadline on the first Run would kill the browser.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(logf), chromedp.WithErrorf(logf))
	b := &Browser{ctx: ctx, cancelAlloc: cancelAlloc, cancelTab: cancelTab}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		b.Close()
		return nil, fmt.Errorf("uitest: start chromium: %w", err)
	}
	return b, nil
}

// Close shuts chromium down gracefully (so it removes its temporary files).
func (b *Browser) Close() {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_ = chromedp.Cancel(ctx)
	b.cancelTab()
	b.cancelAlloc()
}

// Ctx is the tab's context, for chromedp actions of your own.
func (b *Browser) Ctx() context.Context { return b.ctx }

// Open navigates to the page.
func (b *Browser) Open(url string) error {
	return chromedp.Do(b.ctx, chromedp.Navigate(url))
}

// BackendRow is one row of a VIP table as the page shows it.
type BackendRow struct {
	Backend string `json:"backend"`
	Weight  string `json:"weight"`
	State   string `json:"state"`
	// StateDetail is the text beside the state: a failing check's last error.
	StateDetail string `json:"stateDetail"`
	Current     int64  `json:"current"`
	Total       int64  `json:"total"`
	BytesIn     string `json:"bytesIn"`
}

// VIPView is what the page shows for one frontend, plus the live-connection rows.
type VIPView struct {
	Found     bool         `json:"found"`
	Caption   string       `json:"caption"`
	Rows      []BackendRow `json:"rows"`
	FlowRows  int          `json:"flowRows"`
	FlowsToIt int          `json:"flowsToIt"`
	Live      string       `json:"live"`
}

// readVIP opens the VIP's detail first (clicks its overview row, as a user
// would, when it is not open): the page draws a VIP's backend table and
// charts only on demand.
const readVIP = `((frontend) => {
  ` + openVIP + `
  const t = [...document.querySelectorAll('table.vip')].find((t) => t.dataset.frontend === frontend);
  const flows = [...document.querySelectorAll('#flow-table tbody tr[data-flow]')];
  const out = { found: !!t, caption: '', rows: [], flowRows: flows.length,
    flowsToIt: flows.filter((r) => r.children[1].textContent === frontend).length,
    live: document.querySelector('#conn').textContent };
  if (!t) return out;
  out.caption = t.querySelector('caption').textContent;
  for (const r of t.querySelectorAll(':scope > tbody > tr')) {
    const c = [...r.children].map((x) => x.textContent);
    const st = r.children[2].querySelector('.state'), why = r.children[2].querySelector('.why');
    out.rows.push({ backend: c[0], weight: c[1], state: st ? st.textContent : c[2], stateDetail: why ? why.textContent : '',
      current: +c[3], total: +c[4], bytesIn: c[5] });
  }
  return out;
})(%s)`

// VIP reads the table of one frontend ("192.0.2.10:80").
func (b *Browser) VIP(frontend string) (VIPView, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[VIPView](fmt.Sprintf(readVIP, strconv.Quote(frontend))))
}

// WaitVIP polls until the page shows frontend with at least `backends`
// rows whose total connections are all > 0 and at least one live
// connection to it, or until within passes. It returns how long it took.
func (b *Browser) WaitVIP(frontend string, backends int, within time.Duration) (time.Duration, VIPView, error) {
	start := time.Now()
	cond := fmt.Sprintf(`(() => { const v = %s; return v.found && v.flowsToIt > 0 &&
	  v.rows.filter((r) => r.total > 0).length >= %d; })()`, fmt.Sprintf(readVIP, strconv.Quote(frontend)), backends)
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond),
		chromedp.WithPollingTimeout(within)))
	took := time.Since(start)
	v, verr := b.VIP(frontend)
	if err != nil {
		return took, v, fmt.Errorf("page did not show %s with %d active backends and live connections within %v (now: %+v): %w",
			frontend, backends, within, v, err)
	}
	return took, v, verr
}

// WaitGrown polls until every backend row of frontend shows a total above
// its total in before (a backend absent from before counts from 0), or
// until within passes; it returns the last view read. How many connections
// a fixed pause lets through depends on how busy the machine is; that the
// counters move does not.
func (b *Browser) WaitGrown(frontend string, before VIPView, within time.Duration) (VIPView, error) {
	was := map[string]int64{}
	for _, r := range before.Rows {
		was[r.Backend] = r.Total
	}
	end := time.Now().Add(within)
	for {
		v, err := b.VIP(frontend)
		if err != nil {
			return v, err
		}
		grown := len(v.Rows) > 0
		for _, r := range v.Rows {
			grown = grown && r.Total > was[r.Backend]
		}
		if grown {
			return v, nil
		}
		if time.Now().After(end) {
			return v, fmt.Errorf("%s: not every backend's total grew within %v (before %+v, now %+v)", frontend, within, before.Rows, v.Rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitBackendState polls until the VIP table of frontend shows backend in
// state ("up", "down (health check)", "active"…), or until within passes.
func (b *Browser) WaitBackendState(frontend, backend, state string, within time.Duration) (BackendRow, error) {
	cond := fmt.Sprintf(`(() => { const v = %s; return v.rows.some((r) => r.backend === %s && r.state === %s); })()`,
		fmt.Sprintf(readVIP, strconv.Quote(frontend)), strconv.Quote(backend), strconv.Quote(state))
	err := b.poll(cond, within)
	v, verr := b.VIP(frontend)
	for _, r := range v.Rows {
		if r.Backend == backend {
			if err != nil {
				return r, fmt.Errorf("backend %s of %s is %q, not %q, after %v: %w", backend, frontend, r.State, state, within, err)
			}
			return r, verr
		}
	}
	if err == nil {
		err = verr
	}
	return BackendRow{}, fmt.Errorf("no backend %s in the table of %s (%+v): %v", backend, frontend, v, err)
}

// HealthRow is one row of the page's "Health checks" table.
type HealthRow struct {
	Service   string `json:"service"`
	Backend   string `json:"backend"`
	State     string `json:"state"`
	Since     string `json:"since"`
	Failures  int64  `json:"failures"`
	LastError string `json:"lastError"`
}

// HealthView is the "Health checks" section: its rows, its count line and
// whether the summary live region mentions down backends.
type HealthView struct {
	Rows    []HealthRow `json:"rows"`
	Count   string      `json:"count"`
	Summary string      `json:"summary"`
}

const readHealth = `(() => ({
  count: document.querySelector('#health-count').textContent,
  summary: document.querySelector('#summary').textContent,
  rows: [...document.querySelectorAll('#health-table tbody tr[data-backend]')].map((r) => {
    const c = [...r.children].map((x) => x.textContent);
    return { service: c[0], backend: c[1], state: c[2], since: c[3], failures: +c[5], lastError: c[7] };
  }) }))()`

// Health reads the "Health checks" section.
func (b *Browser) Health() (HealthView, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[HealthView](readHealth))
}

// SetToken types the API token into the page's token form.
func (b *Browser) SetToken(token string) error {
	if err := chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#token-form button")),
	); err != nil {
		return err
	}
	return b.poll(`document.querySelector('#token-state').textContent.includes('token set')`, 5*time.Second)
}

// poll waits until the JavaScript expression is truthy.
func (b *Browser) poll(expr string, within time.Duration) error {
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(within),
		chromedp.WithPollingInterval(20*time.Millisecond)))
	return err
}

// FormResult is what the pool form shows after a submit.
type FormResult struct {
	NameError      string `json:"nameError"`
	AddressesError string `json:"addressesError"`
	FormError      string `json:"formError"`
	OK             string `json:"ok"`
	Invalid        string `json:"invalid"` // id of the field marked aria-invalid
}

const readForm = `(() => ({
  nameError: document.querySelector('#pool-name-error').textContent,
  addressesError: document.querySelector('#pool-addresses-error').textContent,
  formError: document.querySelector('#pool-form-error').textContent,
  ok: document.querySelector('#pool-form-ok').textContent,
  invalid: (document.querySelector('#pool-form [aria-invalid=true]') || {}).id || '' }))()`

// SubmitPool opens the pool form (a click on its disclosure, when closed),
// fills it (addresses one per line) and waits for the page's answer: an
// error beside a field, under the form, or success.
func (b *Browser) SubmitPool(name string, addresses []string, within time.Duration) (FormResult, error) {
	open, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.querySelector('#pool-form-box').open`))
	if err == nil && !open {
		err = chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS("#pool-form-box > summary")))
	}
	if err != nil {
		return FormResult{}, err
	}
	err = chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS("#pool-name"), name),
		chromedp.SetValue(chromedp.CSS("#pool-addresses"), strings.Join(addresses, "\n")),
		chromedp.Click(chromedp.CSS("#pool-submit")),
	)
	if err == nil {
		err = b.poll(`(() => { const r = `+readForm+`; return !!(r.nameError || r.addressesError || r.formError || r.ok); })()`, within)
	}
	if err != nil {
		return FormResult{}, fmt.Errorf("pool form gave no answer: %w", err)
	}
	return chromedp.Run(b.ctx, chromedp.Evaluate[FormResult](readForm))
}

// HasPoolRow reports whether the pools table lists name.
func (b *Browser) HasPoolRow(name string) (bool, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`!!document.querySelector('#pool-table tr[data-pool=%s]')`, strconv.Quote(name))))
}

// WaitPoolRow waits until the pools table lists name.
func (b *Browser) WaitPoolRow(name string, within time.Duration) error {
	return b.poll(fmt.Sprintf(`!!document.querySelector('#pool-table tr[data-pool=%s]')`, strconv.Quote(name)), within)
}

// Screenshot writes a full-page PNG.
func (b *Browser) Screenshot(path string) error {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("uitest: screenshot: %w", err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		return errors.New("uitest: screenshot is not a PNG")
	}
	return os.WriteFile(path, png, 0o644)
}

// ChartLine is one line of one chart panel: its raw per-step values (counts
// for connections and bytes, live connections for "active connections") and
// the cumulative counters just before its first point.
type ChartLine struct {
	Series    string   `json:"series"` // "VIP" or the backend
	BaseConns uint64   `json:"baseConns"`
	BaseBytes uint64   `json:"baseBytes"`
	Values    []uint64 `json:"values"`
	Points    int      `json:"points"` // vertices drawn
}

// ChartPanel is one SVG of a VIP's charts.
type ChartPanel struct {
	Metric string      `json:"metric"` // "connections/s", "active connections", "bytes/s"
	Lines  []ChartLine `json:"lines"`
	Marks  []string    `json:"marks"` // "backend up|down" per health mark drawn
}

const readCharts = `((frontend) => {
  ` + openVIP + `
  const f = [...document.querySelectorAll('figure.charts')].find((f) => f.dataset.frontend === frontend);
  if (!f) return [];
  return [...f.querySelectorAll('svg.chart')].map((s) => ({
    metric: s.dataset.metric,
    lines: [...s.querySelectorAll('polyline')].map((p) => ({ series: p.dataset.series,
      baseConns: +p.dataset.baseConns, baseBytes: +p.dataset.baseBytes,
      values: p.dataset.values ? p.dataset.values.split(',').map(Number) : [],
      points: p.getAttribute('points') ? p.getAttribute('points').trim().split(/\s+/).length : 0 })),
    marks: [...s.querySelectorAll('line.mark')].map((m) => m.dataset.backend + ' ' + (m.classList.contains('down') ? 'down' : 'up')),
  }));
})(%s)`

// Charts reads the chart panels drawn under the table of frontend.
func (b *Browser) Charts(frontend string) ([]ChartPanel, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[[]ChartPanel](fmt.Sprintf(readCharts, strconv.Quote(frontend))))
}

// WaitCharts polls until the JavaScript predicate (given the panels as
// `c`) is true, or within passes.
func (b *Browser) WaitCharts(frontend, pred string, within time.Duration) ([]ChartPanel, error) {
	cond := fmt.Sprintf(`(() => { const c = %s; return !!(%s); })()`, fmt.Sprintf(readCharts, strconv.Quote(frontend)), pred)
	err := b.poll(cond, within)
	c, cerr := b.Charts(frontend)
	if err != nil {
		return c, fmt.Errorf("charts of %s: %q not true within %v: %w", frontend, pred, within, err)
	}
	return c, cerr
}

// FleetView is the "Fleet" section: hidden unless the gateway is in one.
type FleetView struct {
	Hidden bool       `json:"hidden"`
	Count  string     `json:"count"`
	Stale  string     `json:"stale"`
	Rows   []FleetRow `json:"rows"`
}

// FleetRow is one gateway of the fleet table.
type FleetRow struct {
	Gateway  string `json:"gateway"`
	Revision string `json:"revision"`
	State    string `json:"state"`
}

const readFleet = `(() => ({
  hidden: document.querySelector('#fleet').hidden,
  count: document.querySelector('#fleet-count').textContent,
  stale: document.querySelector('#fleet-stale').textContent,
  rows: [...document.querySelectorAll('#fleet-table tbody tr[data-gateway]')].map((r) => {
    const c = [...r.children].map((x) => x.textContent);
    return { gateway: c[0], revision: c[1], state: c[3] };
  }) }))()`

// Fleet reads the "Fleet" section.
func (b *Browser) Fleet() (FleetView, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[FleetView](readFleet))
}

// WaitFleet waits until pred (a JavaScript expression over the FleetView
// named f) holds, and returns the view.
func (b *Browser) WaitFleet(pred string, within time.Duration) (FleetView, error) {
	if err := b.poll(`((f) => `+pred+`)(`+readFleet+`)`, within); err != nil {
		v, _ := b.Fleet()
		return v, fmt.Errorf("fleet section: %s not met within %s (last %+v): %w", pred, within, v, err)
	}
	return b.Fleet()
}

// ShotPath is where a test saves the screenshot the docs show at docsPath:
// docsPath itself with EDGELB_SCREENSHOTS=docs (refreshing the README's
// pictures: `EDGELB_SCREENSHOTS=docs make test-ui`), else t's temporary
// directory, so `make test` leaves the tree as it found it.
func ShotPath(t testing.TB, docsPath string) string {
	if os.Getenv("EDGELB_SCREENSHOTS") == "docs" {
		return docsPath
	}
	return filepath.Join(t.TempDir(), filepath.Base(docsPath))
}
