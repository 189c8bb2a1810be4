// Package logbuf keeps a child process's output for the test that started
// it: written by the process's copy goroutine, read by the test (to wait
// for a log line, or to quote the end of the log when something fails).
package logbuf

import (
	"io"
	"os"
	"strings"
	"sync"
)

// Buffer is a goroutine-safe log sink. The zero value is ready to use;
// Tee, when set before the first Write, also receives everything written
// (a test's -v output, a file).
type Buffer struct {
	mu  sync.Mutex
	b   strings.Builder
	Tee io.Writer
}

// Write appends p (and copies it to Tee). It never fails: a failing Tee
// must not stop the process's output from being kept.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Tee != nil {
		l.Tee.Write(p) //nolint:errcheck // best effort, see above
	}
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail is the last n lines written so far.
func (l *Buffer) Tail(n int) string { return Tail(l.String(), n) }

// Tail returns the last n lines of s (without its final newline).
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// FileTail returns the last n lines of the file at path, or why it could
// not be read (it is quoted in an error message, never parsed).
func FileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return Tail(string(b), n)
}
