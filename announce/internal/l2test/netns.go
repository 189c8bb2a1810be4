//go:build netns

package l2test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
)

// Capture is a raw packet socket on an interface inside a namespace that
// records every frame it receives with its arrival time (no tcpdump start-up
// race). Conn and MAC let a test also send from that interface.
type Capture struct {
	Conn   *packet.Conn
	MAC    net.HardwareAddr
	mu     sync.Mutex
	frames []Frame
}

// Frame is one received frame.
type Frame struct {
	At time.Time
	B  []byte
}

// Listen starts a Capture of etherType frames (narrowed by filter, if any) on
// ifName in ns; it is closed at cleanup.
func Listen(t *testing.T, ns *netns.NS, ifName string, etherType int, filter []bpf.RawInstruction) *Capture {
	t.Helper()
	c := &Capture{}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		c.MAC = ifi.HardwareAddr
		c.Conn, err = packet.Listen(ifi, packet.Raw, etherType, &packet.Config{Filter: filter})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 9216)
		for {
			n, _, err := c.Conn.ReadFrom(buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.frames = append(c.frames, Frame{time.Now(), append([]byte(nil), buf[:n]...)})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Conn.Close() })
	return c
}

// Since returns the frames received at t0 or later.
func (c *Capture) Since(t0 time.Time) []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Frame
	for _, f := range c.frames {
		if !f.At.Before(t0) {
			out = append(out, f)
		}
	}
	return out
}

// Start builds a responder inside ns (its sockets belong to the namespace
// they were opened in) and closes it at cleanup.
func Start[R io.Closer](t *testing.T, ns *netns.NS, build func() (R, error)) R {
	t.Helper()
	var r R
	err := ns.Do(func() error {
		var err error
		r, err = build()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
