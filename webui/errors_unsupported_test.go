package webui

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// What the running dataplane cannot do is 422 naming the field; other bad
// input stays 400 (issue 14).
func TestUnsupportedIs422(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	un := &lb.FieldError{Field: "scheduler", Value: "lc", Err: fmt.Errorf("refused by the running dataplane: %w", proxy.ErrUnsupported)}
	if ae := toAPIError(fmt.Errorf("put: %w", un), log); ae.Status != http.StatusUnprocessableEntity || ae.Field != "scheduler" || ae.Value != "lc" {
		t.Fatalf("unsupported: %+v", ae)
	}
	bad := &lb.FieldError{Field: "port", Value: "0", Err: fmt.Errorf("want 1-65535")}
	if ae := toAPIError(bad, log); ae.Status != http.StatusBadRequest {
		t.Fatalf("bad input: %+v", ae)
	}
}
