package daemon

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNotifyProtocol listens on a real NOTIFY_SOCKET the way systemd does and
// checks the datagrams the daemon sends.
func TestNotifyProtocol(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	n, err := newNotifier()
	if err != nil {
		t.Fatal(err)
	}
	if n.interval != 100*time.Millisecond {
		t.Fatalf("watchdog ping interval %v, want half of WatchdogSec (100ms)", n.interval)
	}
	recv := func() string {
		buf := make([]byte, 512)
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:k])
	}
	n.Ready("serving 3 services")
	if got := recv(); !strings.Contains(got, "READY=1") || !strings.Contains(got, "STATUS=serving 3 services") {
		t.Fatalf("ready datagram %q", got)
	}
	now := time.Now()
	n.Alive(now)
	if got := recv(); got != "WATCHDOG=1" {
		t.Fatalf("watchdog datagram %q", got)
	}
	n.Alive(now.Add(10 * time.Millisecond)) // too soon: no ping
	n.Alive(now.Add(150 * time.Millisecond))
	if got := recv(); got != "WATCHDOG=1" {
		t.Fatalf("second watchdog datagram %q", got)
	}
	n.Reloading()
	if got := recv(); got != "RELOADING=1" {
		t.Fatalf("reloading datagram %q", got)
	}
	n.Stopping()
	if got := recv(); got != "STOPPING=1" {
		t.Fatalf("stopping datagram %q", got)
	}
}
