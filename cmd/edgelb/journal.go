package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
)

// Under systemd, stderr is a stream to journald, which files every line at
// the unit's SyslogLevel (info) unless the line starts with a "<N>" syslog
// priority (SyslogLevelPrefix=yes, the default): without it `journalctl -p
// warning` never showed edgelb's warnings (lab/system, issue 38).

// toJournal: w is the stream systemd connected to journald, as
// $JOURNAL_STREAM ("DEVICE:INODE") names it.
func toJournal(w io.Writer) bool {
	f, ok := w.(*os.File)
	env := os.Getenv("JOURNAL_STREAM")
	if !ok || env == "" {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && env == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// withPriority gives each record's line the syslog priority of its level:
// one handler per level, each writing through its prefix, one lock so lines
// never interleave.
func withPriority(w io.Writer, mk func(io.Writer) slog.Handler) slog.Handler {
	mu := new(sync.Mutex)
	var h levelHandler
	for i, p := range []string{"<7>", "<6>", "<4>", "<3>"} {
		h[i] = mk(&prefixWriter{w: w, prefix: []byte(p), mu: mu})
	}
	return h
}

type prefixWriter struct {
	w      io.Writer
	prefix []byte
	mu     *sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.w.Write(append(append([]byte(nil), p.prefix...), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// levelHandler: debug, info, warn, error.
type levelHandler [4]slog.Handler

func (h levelHandler) pick(l slog.Level) slog.Handler {
	switch {
	case l >= slog.LevelError:
		return h[3]
	case l >= slog.LevelWarn:
		return h[2]
	case l >= slog.LevelInfo:
		return h[1]
	}
	return h[0]
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.pick(l).Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var o levelHandler
	for i := range h {
		o[i] = h[i].WithAttrs(as)
	}
	return o
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	var o levelHandler
	for i := range h {
		o[i] = h[i].WithGroup(name)
	}
	return o
}
