//go:build ui

package webui

import (
	"testing"

	"github.com/edgelb/edgelb/webui/uitest"
)

// newPage starts the browser every UI test uses (1366×900, closed when the
// test ends).
func newPage(t *testing.T) *uitest.Browser {
	t.Helper()
	b, err := uitest.NewBrowser(t.TempDir(), 1366, 900, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// openPage is newPage with the page at url loaded.
func openPage(t *testing.T, url string) *uitest.Browser {
	t.Helper()
	b := newPage(t)
	if err := b.Open(url); err != nil {
		t.Fatal(err)
	}
	return b
}
