//go:build bgp

package ecmp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The daemon binary is built once per test binary (or taken from
// EDGELB_BIN, which lab/bench.sh sets to the `make build` output).
var build struct {
	sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

func edgelbBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("EDGELB_BIN"); p != "" {
		return p
	}
	build.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "edgelb-ecmp-"); build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "edgelb")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/edgelb")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}
