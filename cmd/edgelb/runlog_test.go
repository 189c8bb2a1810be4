package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
)

// The config's log section sets the daemon's format and level unless a flag
// says otherwise (the systemd unit passes none).
func TestDaemonLoggerConfigAndFlags(t *testing.T) {
	warn := slog.LevelWarn
	cases := []struct {
		format string
		level  *slog.Level
		cfg    config.Log
		want   string // the first line, prefix
		debug  bool   // whether a debug line is written
	}{
		{"", nil, config.Log{Format: "json", Level: slog.LevelDebug}, `{"time":`, true},
		{"", nil, config.Log{Format: "text"}, "time=", false},
		{"text", nil, config.Log{Format: "json"}, "time=", false},
		{"json", &warn, config.Log{Format: "text", Level: slog.LevelDebug}, `{"time":`, false},
	}
	for _, c := range cases {
		var b bytes.Buffer
		log := daemonLogger(&b, c.format, c.level)(c.cfg)
		log.Debug("d")
		log.Warn("w")
		out := b.String()
		if !strings.HasPrefix(out, c.want) {
			t.Errorf("flags %q/%v, config %+v: %q, want prefix %q", c.format, c.level, c.cfg, out, c.want)
		}
		if got := strings.Count(out, "\n") == 2; got != c.debug {
			t.Errorf("flags %q/%v, config %+v: debug line written %v, want %v: %q", c.format, c.level, c.cfg, got, c.debug, out)
		}
	}
}
