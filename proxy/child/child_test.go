package child

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRunRestartsAndStops: a child that exits is started again (Prepare
// before each start, Started and Exited around each run), its output is
// logged through Line, its environment has no NOTIFY_SOCKET, and when ctx
// ends a child that ignores nothing gets SIGTERM and Run returns after it
// exited (Exited once more).
func TestRunRestartsAndStops(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	var mu sync.Mutex
	var prepared, started, exited int
	count := func(p *int) int { mu.Lock(); defer mu.Unlock(); return *p }
	var logs logBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	first := true
	go func() {
		defer close(done)
		Run(ctx, log, Spec{
			Name: "helper",
			Command: func() *exec.Cmd {
				if first { // the first run exits at once; the second waits for its SIGTERM
					first = false
					return exec.Command("sh", "-c", `echo "[x] (pid=1) [notice] up env=${NOTIFY_SOCKET:-none}"; exit 3`)
				}
				return exec.Command("sh", "-c", `trap 'echo bye; exit 0' TERM; echo waiting; while :; do sleep 0.05; done`)
			},
			Prepare: func() { mu.Lock(); prepared++; mu.Unlock() },
			Line:    func(l string) string { return strings.TrimPrefix(l, "[x] (pid=1) [notice] ") },
			Started: func(int, <-chan struct{}) { mu.Lock(); started++; mu.Unlock() },
			Exited:  func(error, time.Duration) { mu.Lock(); exited++; mu.Unlock() },
		})
	}()
	waitFor(t, "the second start", func() bool { return count(&started) == 2 && strings.Contains(logs.String(), "helper: waiting") })
	if !strings.Contains(logs.String(), `msg="helper: up env=none"`) || !strings.Contains(logs.String(), "helper exited; restarting") {
		t.Errorf("log:\n%s", logs.String())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if p, s, e := count(&prepared), count(&started), count(&exited); p != 2 || s != 2 || e != 2 {
		t.Errorf("prepared %d, started %d, exited %d; want 2 each", p, s, e)
	}
	if !strings.Contains(logs.String(), "helper: bye") {
		t.Errorf("the second child did not get SIGTERM:\n%s", logs.String())
	}
}
