package bfdd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrCommand is a command bfdd answered with a non-zero status.
var ErrCommand = errors.New("bfdd refused the command")

// vty is a client of an FRR daemon's vtysh socket, the interface vtysh
// itself uses: each command goes out NUL-terminated; the answer is the
// command's output followed by three NUL bytes and the status byte
// (CMD_SUCCESS = 0). A connection starts in the view node: "enable" first,
// as vtysh does. One connection is kept and reused; the daemon keeps the
// configuration node between commands on it.
type vty struct {
	path string

	mu   sync.Mutex
	conn net.Conn
}

func (v *vty) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn != nil {
		v.conn.Close()
		v.conn = nil
	}
}

// run sends the commands in order on one connection and returns the last
// one's output. It stops at the first refused command.
func (v *vty) run(ctx context.Context, cmds ...string) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", v.path)
		if err != nil {
			return "", fmt.Errorf("bfdd vty %s: %w", v.path, err)
		}
		v.conn = c
		cmds = append([]string{"enable"}, cmds...)
	}
	deadline := time.Now().Add(cmdTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	v.conn.SetDeadline(deadline)
	var out string
	for _, c := range cmds {
		o, status, err := v.one(c)
		if err != nil {
			// The connection's position in the answer is lost: start over.
			v.conn.Close()
			v.conn = nil
			return "", fmt.Errorf("bfdd vty %q: %w", c, err)
		}
		if status != 0 {
			return "", fmt.Errorf("%w: %q: status %d: %s", ErrCommand, c, status, bytes.TrimSpace([]byte(o)))
		}
		out = o
	}
	return out, nil
}

func (v *vty) one(cmd string) (string, byte, error) {
	if _, err := v.conn.Write(append([]byte(cmd), 0)); err != nil {
		return "", 0, err
	}
	var buf []byte
	chunk := make([]byte, 16<<10)
	for {
		n, err := v.conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if l := len(buf); l >= 4 && buf[l-4] == 0 && buf[l-3] == 0 && buf[l-2] == 0 {
			return string(buf[:l-4]), buf[l-1], nil
		}
		if err != nil {
			return "", 0, err
		}
	}
}
