package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFreshStore(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	empty := filepath.Join(dir, "empty.db")
	full := filepath.Join(dir, "full.db")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(full, []byte("x"), 0o600)
	for _, c := range []struct {
		name   string
		path   string
		tables []string
		want   error
		warn   bool
	}{
		{"missing, edgelb's tables in the kernel", missing, []string{"table ip edgelb"}, ErrStateGone, false},
		{"empty, edgelb's tables in the kernel", empty, []string{"table inet edgelb-ipvs"}, ErrStateGone, false},
		{"missing, nothing in the kernel: a first start", missing, nil, nil, true},
		{"empty, nothing in the kernel", empty, nil, nil, true},
		{"a state file with content: not this check's business", full, []string{"table ip edgelb"}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := kernelState
			kernelState = func() ([]string, error) { return c.tables, nil }
			defer func() { kernelState = old }()
			var logs bytes.Buffer
			err := checkFreshStore(c.path, slog.New(slog.NewTextHandler(&logs, nil)))
			t.Logf("%v %s", err, logs.String())
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if c.want != nil && (!strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), "edgelb cleanup")) {
				t.Errorf("the error must name the file and the way out: %v", err)
			}
			if got := strings.Contains(logs.String(), "starting with an empty state"); got != c.warn {
				t.Errorf("warned %v, want %v", got, c.warn)
			}
		})
	}
}
