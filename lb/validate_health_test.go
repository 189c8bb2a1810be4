package lb

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateHealthCheck: the bad checks issue 8 names are refused on
// their field.
func TestValidateHealthCheck(t *testing.T) {
	ok := HealthCheck{Type: "http", Path: "/healthz", Interval: time.Second, Timeout: 500 * time.Millisecond, Rise: 2, Fall: 3}
	for _, tc := range []struct {
		desc, field, msg string
		mod              func(h *HealthCheck)
	}{
		{"ok", "", "", func(h *HealthCheck) {}},
		{"interval negative", "healthCheck.interval", "more than 0", func(h *HealthCheck) { h.Interval = -time.Second }},
		{"URL without a host in path", "healthCheck.path", "a URL without a host", func(h *HealthCheck) { h.Path = "http:///healthz" }},
		{"URL in path", "healthCheck.path", "a URL, not a path", func(h *HealthCheck) { h.Path = "http://svc/healthz" }},
		{"relative path", "healthCheck.path", "must start with /", func(h *HealthCheck) { h.Path = "healthz" }},
	} {
		s := goodService()
		h := ok
		tc.mod(&h)
		s.Health = &h
		NormalizeService(&s)
		err := ValidateService(&s, ValidateOptions{})
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.desc, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%s: got %v, want field %s saying %q", tc.desc, err, tc.field, tc.msg)
		}
	}
}
