//go:build ui

package webui

import (
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/webui/uitest"
)

// TestUITokenPrompt: on an API that needs a token for reads (listening
// beyond loopback), the page without a token gets 401 and asks for one in a
// dialog instead of showing empty tables; a read token typed there is kept
// in sessionStorage and the services, announcements and audit trail appear.
// A refused token kept from before asks again, saying it was refused.
func TestUITokenPrompt(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Skip(err)
	}
	m := newFakeManager()
	m.seed(t)
	_, ts := startServer(t, m, func(o *Options) {
		o.Listen = "203.0.113.1:8080"
		o.Tokens = []Token{{Name: "grafana", Secret: readToken, Role: RoleRead}}
		o.Audit = someAudit()
	})

	b := openPage(t, ts.URL+"/")
	p, err := b.WaitTokenPrompt(true, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.Overview()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("401 → prompt: %q; overview rows %d", p.Why, len(o.Rows))
	if !strings.Contains(p.Why, "reads need a read (or write) token") || len(o.Rows) != 0 {
		t.Errorf("prompt %+v, rows %d", p, len(o.Rows))
	}

	if err := b.AnswerTokenPrompt(readToken); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitTokenPrompt(false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	o, err = b.WaitOverview(`o.rows.length === 1 && o.rows[0].key === '192.0.2.10:80/TCP' && o.summary.includes('1 service ·')`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := uitest.Eval[string](b, `sessionStorage.getItem('edgelb-token')`)
	if err != nil || kept != readToken {
		t.Errorf("token kept in sessionStorage: %q %v", kept, err)
	}
	checkAuditShown := `document.querySelectorAll('#audit-table tbody tr').length === 3 &&
	  document.querySelector('#audit-table tbody tr td:nth-child(2)').textContent === 'ops' &&
	  document.querySelector('#bgp-table tbody tr th').textContent === 'tor1'`
	if err := b.WaitJS(checkAuditShown, 30*time.Second); err != nil {
		t.Fatalf("audit trail and announcements after the token: %v", err)
	}
	t.Logf("token → data: overview %q, header %q; audit trail and BGP sessions shown", o.Rows[0].VIP, o.Summary)

	// A token this gateway refuses, kept from before: the prompt says so.
	if _, err := uitest.Eval[bool](b, `(sessionStorage.setItem('edgelb-token', 'not-a-token'), true)`); err != nil {
		t.Fatal(err)
	}
	if err := b.Open(ts.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if p, err = b.WaitTokenPrompt(true, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Why, "was refused") {
		t.Errorf("prompt for a refused token: %q", p.Why)
	}
	t.Logf("refused token → prompt: %q", p.Why)
}
