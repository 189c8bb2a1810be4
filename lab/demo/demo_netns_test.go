//go:build netns

package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsDemoCommand runs `edgelb-demo --duration 20s` (what `make demo`
// runs) as a user would and checks it exits 0 and leaves no namespace behind (links and nft tables live
// inside the namespaces, so they go with them).
func TestNetnsDemoCommand(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	tool := filepath.Join(t.TempDir(), "edgelb-demo")
	if out, err := exec.Command("go", "build", "-o", tool, "github.com/edgelb/edgelb/lab/demo/cmd/edgelb-demo").CombinedOutput(); err != nil {
		t.Fatalf("go build edgelb-demo: %v\n%s", err, out)
	}
	cmd := exec.Command(tool, "--edgelb", exe, "--duration", "20s", "--ui", "127.0.0.1:18081")
	out, err := cmd.CombinedOutput()
	t.Logf("edgelb-demo --duration 20s:\n%s", out)
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}
	if !strings.Contains(string(out), "every backend was reached") {
		t.Fatal("demo did not report every backend reached")
	}
	left, _ := os.ReadDir("/run/netns")
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "edgelb-demo") {
			t.Errorf("namespace left behind: %s", e.Name())
		}
	}
}
