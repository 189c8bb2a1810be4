package netns

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

var seq atomic.Uint32

// Unique returns a namespace or link name that no other test process uses:
// prefix, pid and a counter, kept short for IFNAMSIZ (15) when prefix is short.
func Unique(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, os.Getpid()%100000, seq.Add(1))
}

// RequireRoot skips the test when not running as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

// NewT creates a uniquely named namespace deleted when the test ends (also on failure).
func NewT(t testing.TB, prefix string) *NS {
	t.Helper()
	RequireRoot(t)
	n, err := New(Unique(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}
