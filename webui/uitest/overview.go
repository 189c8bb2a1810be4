package uitest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/chromedp/chromedp"
)

// openVIP is a statement for the reading scripts (frontend in scope): when
// the VIP's detail is not drawn, click its overview row (the first one on
// the page with that frontend) to open it.
const openVIP = `if (![...document.querySelectorAll('table.vip')].some((t) => t.dataset.frontend === frontend)) {
    const r = [...document.querySelectorAll('#vip-summary tr[data-key]')].find((r) => r.dataset.frontend === frontend);
    if (r && !r.classList.contains('open')) r.querySelector('button.disclose').click();
  }`

// SummaryRow is one row of the virtual services overview.
type SummaryRow struct {
	Key      string `json:"key"`
	VIP      string `json:"vip"`
	Service  string `json:"service"`
	Backends string `json:"backends"`
	Conns    string `json:"conns"`
	Bytes    string `json:"bytes"`
	Open     bool   `json:"open"`
}

// Overview is the virtual services section and the page around it.
type Overview struct {
	Rows       []SummaryRow      `json:"rows"`
	Count      string            `json:"count"`   // the section heading's count
	Pager      string            `json:"pager"`   // "rows 1–25 of 1,001, page 1 of 41"
	Summary    string            `json:"summary"` // the header's counts
	Sort       map[string]string `json:"sort"`    // column -> aria-sort
	Details    []string          `json:"details"` // frontends whose backend table is drawn
	PageHeight int               `json:"pageHeight"`
	// Sections is each part's height in px (header, every section, footer).
	Sections map[string]int `json:"sections"`
}

const readOverview = `(() => {
  const rows = [...document.querySelectorAll('#vip-summary tbody tr[data-key]')].map((r) => {
    const c = [...r.children].map((x) => x.textContent);
    return { key: r.dataset.key, vip: c[0], service: c[1], backends: c[2], conns: c[3], bytes: c[4], open: r.classList.contains('open') };
  });
  const sort = {};
  for (const th of document.querySelectorAll('#vip-summary th[data-sort]')) sort[th.dataset.sort] = th.getAttribute('aria-sort');
  return { rows, sort, count: document.querySelector('#vip-count').textContent,
    pager: document.querySelector('#vip-page').textContent, summary: document.querySelector('#summary').textContent,
    details: [...document.querySelectorAll('#vip-summary table.vip')].map((t) => t.dataset.frontend),
    pageHeight: document.documentElement.scrollHeight,
    sections: Object.fromEntries([...document.querySelectorAll('header, main > section, footer')].map((e) => [e.id || e.tagName.toLowerCase(), Math.round(e.getBoundingClientRect().height)])) };
})()`

// Overview reads the virtual services overview.
func (b *Browser) Overview() (Overview, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[Overview](readOverview))
}

// WaitOverview waits until pred (a JavaScript expression over the Overview
// named o) holds, and returns the view.
func (b *Browser) WaitOverview(pred string, within time.Duration) (Overview, error) {
	if err := b.poll(`((o) => !!(`+pred+`))(`+readOverview+`)`, within); err != nil {
		v, _ := b.Overview()
		return v, fmt.Errorf("overview: %s not met within %s (last: %d rows, count %q, pager %q, summary %q): %w",
			pred, within, len(v.Rows), v.Count, v.Pager, v.Summary, err)
	}
	return b.Overview()
}

// Filter puts text into the overview's filter box and fires the input
// event typing fires.
func (b *Browser) Filter(text string) error {
	_, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`((v) => { const i = document.querySelector('#vip-filter');
  i.value = v; i.dispatchEvent(new Event('input', { bubbles: true })); return true; })(`+strconv.Quote(text)+`)`))
	return err
}

// SortBy clicks the header of an overview column: vip, service, backends,
// conns or bytes.
func (b *Browser) SortBy(column string) error {
	return chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#vip-summary th[data-sort=`+strconv.Quote(column)+`] button`)))
}

// ClickRow clicks an overview row (by its key, "frontend/PROTO") somewhere
// other than its button: the whole row opens or closes the detail.
func (b *Browser) ClickRow(key string) error {
	return chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#vip-summary tr[data-key=`+strconv.Quote(key)+`] td:nth-child(2)`)))
}

// Timings are the page's own Performance API figures, in ms since navigation.
type Timings struct {
	FirstContentfulPaint float64 `json:"fcp"`
	SummaryRows          float64 `json:"rows"`   // the mark the page sets when it first draws overview rows
	Render               float64 `json:"render"` // one full render() now, timed in the page
}

// Timings reads first-contentful-paint and the page's edgelb-summary-rows
// mark, and times one render().
func (b *Browser) Timings() (Timings, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[Timings](`(() => {
  const fcp = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
  const rows = performance.getEntriesByName('edgelb-summary-rows')[0];
  const t0 = performance.now(); render(); const r = performance.now() - t0;
  return { fcp: fcp ? fcp.startTime : -1, rows: rows ? rows.startTime : -1, render: r };
})()`))
}

// TokenPrompt is the dialog the page opens when reads need a token.
type TokenPrompt struct {
	Open bool   `json:"open"`
	Why  string `json:"why"`
}

const readPrompt = `(() => ({ open: document.querySelector('#token-dialog').open,
  why: document.querySelector('#token-dialog-why').textContent }))()`

// WaitTokenPrompt waits until the token dialog is open (or closed: open=false).
func (b *Browser) WaitTokenPrompt(open bool, within time.Duration) (TokenPrompt, error) {
	err := b.poll(fmt.Sprintf(`%s.open === %v`, readPrompt, open), within)
	p, perr := chromedp.Run(b.ctx, chromedp.Evaluate[TokenPrompt](readPrompt))
	if err != nil {
		return p, fmt.Errorf("token dialog open=%v not reached within %v (now %+v): %w", open, within, p, err)
	}
	return p, perr
}

// AnswerTokenPrompt types token into the dialog and submits it.
func (b *Browser) AnswerTokenPrompt(token string) error {
	return chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS("#token-dialog-input"), token),
		chromedp.Click(chromedp.CSS("#token-dialog-submit")))
}

// Eval evaluates a JavaScript expression into T (for reads the helpers do
// not cover: the announcements and audit tables).
func Eval[T any](b *Browser, expr string) (T, error) {
	return chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
}

// WaitJS waits until a JavaScript expression is truthy.
func (b *Browser) WaitJS(expr string, within time.Duration) error { return b.poll(expr, within) }
