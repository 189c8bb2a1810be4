package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestWithPriorityPrefixesEachLine(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(withPriority(&b, func(w io.Writer) slog.Handler {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	})).With("component", "api")
	log.Debug("d")
	log.Info("i")
	log.Warn("w")
	log.Error("e")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{`<7>{`, `<6>{`, `<4>{`, `<3>{`}
	if len(lines) != len(want) {
		t.Fatalf("lines %q", lines)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) || !strings.Contains(l, `"component":"api"`) {
			t.Errorf("line %d %q, want prefix %q and the With attribute", i, l, want[i])
		}
	}
}

func TestToJournalMatchesJournalStream(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	st := fi.Sys().(*syscall.Stat_t)
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !toJournal(f) {
		t.Error("the stream JOURNAL_STREAM names is not taken for the journal")
	}
	if toJournal(os.Stdout) || toJournal(&bytes.Buffer{}) {
		t.Error("another stream taken for the journal")
	}
	t.Setenv("JOURNAL_STREAM", "")
	if toJournal(f) {
		t.Error("no JOURNAL_STREAM, yet the journal")
	}
}
