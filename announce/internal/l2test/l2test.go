// Package l2test holds the test scaffolding the ARP and NDP responders (and
// their shared core, announce/internal/l2resp) have in common. Only tests
// import it.
package l2test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// Conn is an in-memory packet socket: frames sent into In are read, frames
// written are recorded, and Close makes a blocked read fail as a real socket
// would.
type Conn struct {
	In     chan []byte
	mu     sync.Mutex
	out    [][]byte
	closed chan struct{}
	once   sync.Once
}

// NewConn returns an open Conn.
func NewConn() *Conn {
	return &Conn{In: make(chan []byte, 16), closed: make(chan struct{})}
}

func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case f := <-c.In:
		return copy(b, f), nil, nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *Conn) WriteTo(b []byte, _ net.Addr) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, bytes.Clone(b))
	return len(b), nil
}

func (c *Conn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// Written returns the frames written so far.
func (c *Conn) Written() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.out)
}

// WaitFor polls get until cond holds: the responder's read loop runs on its
// own goroutine, so what a test sent is counted a little later. The deadline
// only catches a hang: on a machine with every core busy "a little later"
// has been seconds.
func WaitFor[S any](t testing.TB, get func() S, cond func(S) bool) S {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := get()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never matched: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// WriteCorpus writes seeds as the committed seed corpus of fuzz target name
// (testdata/fuzz/name) when EDGELB_WRITE_CORPUS=1, and skips otherwise: the
// corpus is only regenerated on purpose.
func WriteCorpus(t *testing.T, name string, seeds map[string][]byte) {
	if os.Getenv("EDGELB_WRITE_CORPUS") != "1" {
		t.Skip("set EDGELB_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, b := range seeds {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
