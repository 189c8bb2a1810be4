//go:build ui

package webui

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/webui/uitest"
)

// TestUIBFDUnavailable: a BGP peer whose BFD cannot run on this gateway
// (bfdd.Unavailable) shows "unavailable" in the BFD column, in the colour of
// a down session, with the reason beside it: the page must not look like a
// gateway protected by BFD.
func TestUIBFDUnavailable(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Skip(err)
	}
	const why = "bfd: bfdd (FRR) would refuse to start: edgelb runs as uid 61234, which /etc/passwd does not know"
	m := newFakeManager()
	m.seed(t)
	_, ts := startServer(t, m, func(o *Options) {
		o.Reporters = []announce.Reporter{fakeReporter{announce.Status{Kind: "bgp", Peers: []announce.PeerState{{
			Name: "tor1", Address: "198.51.100.254:179", State: "Established",
			BFD: &announce.BFDState{State: "unavailable", Detect: "300ms x 3", Diagnostic: why}}}}}}
	})
	b := openPage(t, ts.URL+"/")
	const cell = `document.querySelector('#bgp-table tr[data-peer="tor1"] td.bfd')`
	if err := b.WaitJS(cell+` && `+cell+`.textContent === 'unavailable'`, 30*time.Second); err != nil {
		t.Fatalf("the BFD cell does not say unavailable: %v", err)
	}
	type view struct {
		Color, Bad, Row string
	}
	v, err := chromedp.Run(b.Ctx(), chromedp.Evaluate[view](`(() => {
  const c = `+cell+`;
  const probe = document.createElement('span'); probe.style.color = 'var(--bad)'; document.body.append(probe);
  const bad = getComputedStyle(probe).color; probe.remove();
  return { color: getComputedStyle(c).color, bad, row: c.closest('tr').textContent };
})()`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Color != v.Bad {
		t.Errorf("the unavailable cell is %s, want the down colour %s", v.Color, v.Bad)
	}
	if !strings.Contains(v.Row, why) {
		t.Errorf("the row does not give the reason: %q", v.Row)
	}
	t.Logf("BGP row: %s (colour %s)", v.Row, v.Color)
}
