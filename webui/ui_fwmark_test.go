//go:build ui

package webui

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/webui/uitest"
)

// TestUIFWMarkService: a firewall-mark service has no address of its own,
// so its row in the services table says "fwmark N" where an address
// service shows its VIP — not "pending", which would tell the operator it
// waits for an address it will never get.
func TestUIFWMarkService(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Skip(err)
	}
	m := newFakeManager()
	m.seed(t)
	mark := lb.ServiceSpec{Name: "marked", FWMark: 42, Scheduler: "rr", Method: "nat",
		Backends: []lb.BackendSpec{{Addr: netip.MustParseAddr("198.51.100.7"), Weight: 1}}}
	if _, _, err := m.PutService(context.Background(), mark); err != nil {
		t.Fatal(err)
	}
	_, ts := startServer(t, m, nil)
	b := openPage(t, ts.URL+"/")
	cell := func(name string) string {
		return `(document.querySelector('#service-table tr[data-service="` + name + `"] td') || {}).textContent`
	}
	if err := b.WaitJS(cell("marked")+` === 'fwmark 42' && `+cell("web")+` === '192.0.2.10'`, 30*time.Second); err != nil {
		got, _ := chromedp.Run(b.Ctx(), chromedp.Evaluate[[]string](`[`+cell("marked")+`, `+cell("web")+`]`))
		got = append(got, "", "")
		t.Fatalf("services table address cells: marked %q, web %q, want \"fwmark 42\" and \"192.0.2.10\": %v", got[0], got[1], err)
	}
	t.Log(`services table: marked → "fwmark 42", web → "192.0.2.10"`)
}
