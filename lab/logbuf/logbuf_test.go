package logbuf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb"},
		{"a\nb\n", 0, ""},
	} {
		if got := Tail(c.in, c.n); got != c.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestBufferConcurrent: writers and readers at once keep every line, in
// the buffer and in the tee (go test -race ./lab/logbuf checks the locking).
func TestBufferConcurrent(t *testing.T) {
	var tee bytes.Buffer
	b := &Buffer{Tee: &tee}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				b.Write([]byte("line\n"))
				_ = b.Tail(2)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 400 {
		t.Fatalf("%d lines kept, want 400", n)
	}
	if tee.String() != b.String() {
		t.Fatal("the tee got something else")
	}
	if got := b.Tail(1); got != "line" {
		t.Fatalf("Tail(1) = %q", got)
	}
}

func TestFileTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("1\n2\n3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := FileTail(p, 2); got != "2\n3" {
		t.Fatalf("FileTail = %q", got)
	}
	if got := FileTail(p+".missing", 2); !strings.HasPrefix(got, "(unreadable: ") {
		t.Fatalf("FileTail of a missing file = %q", got)
	}
}
