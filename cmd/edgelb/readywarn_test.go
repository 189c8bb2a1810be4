package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
)

// TestReadyWarnings: `edgelb status` prints /readyz's warnings (a full
// state directory) and a not-ready answer; a clean /readyz prints nothing.
func TestReadyWarnings(t *testing.T) {
	body, code := "ready\n", 200
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		w.Write([]byte(body))
	}))
	defer ts.Close()
	u, _ := url.Parse(ts.URL)
	c := &apiClient{base: u, hc: ts.Client()}
	if got := readyWarnings(context.Background(), c); len(got) != 0 {
		t.Errorf("clean: %q", got)
	}
	body = "ready\nwarning: writes fail: disk full\n"
	if got := readyWarnings(context.Background(), c); !slices.Equal(got, []string{"warning: writes fail: disk full"}) {
		t.Errorf("full disk: %q", got)
	}
	body, code = `{"error":"not ready: dataplane"}`, 503
	if got := readyWarnings(context.Background(), c); !slices.Equal(got, []string{`warning: not ready: {"error":"not ready: dataplane"}`}) {
		t.Errorf("not ready: %q", got)
	}
}
