// Package edgelbbin gives the lab's tests that run the real daemon one
// edgelb binary per test binary: EDGELB_BIN when set (lab/bench.sh sets it to
// the `make build` output), else `go build ./cmd/edgelb` once, at the
// module root whatever the test package's depth, into a temporary directory
// that Main removes when the tests end.
package edgelbbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var build struct {
	sync.Once
	dir, path string
	err       error
}

// Path returns the daemon binary, building it on first use; a failed build
// fails t (and every later caller) with the compiler's output.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("EDGELB_BIN"); p != "" {
		return p
	}
	build.Do(func() { build.path, build.err = compile() })
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

func compile() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("edgelbbin: not inside the edgelb module (go env GOMOD: %q, %v)", gomod, err)
	}
	if build.dir, err = os.MkdirTemp("", "edgelb-bin-"); err != nil {
		return "", err
	}
	path := filepath.Join(build.dir, "edgelb")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/edgelb")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/edgelb: %v\n%s", err, out)
	}
	return path, nil
}

// Main runs the tests and then removes the built binary:
// func TestMain(m *testing.M) { edgelbbin.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}
