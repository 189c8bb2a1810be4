package ports

import (
	"net"
	"strconv"
	"testing"
)

// Free's ports lie below the ephemeral range and bind for TCP and UDP.
func TestFreeBelowEphemeralRange(t *testing.T) {
	hi := ephemeralLow()
	for range 50 {
		p := MustFree(t)
		if p < lowest || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, hi)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}

// A port in use is not handed out.
func TestFreeSkipsBusyPorts(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[int]bool{}
	for range 20 {
		p := MustFree(t)
		if busy[p] {
			t.Fatalf("port %d handed out while held", p)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		busy[p] = true
	}
}
