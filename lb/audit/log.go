package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultKeep is how many entries the Log keeps (memory and file).
const DefaultKeep = 1000

// Log is the audit trail: the newest Keep entries, in memory and in a
// JSON-lines file that is appended to and rewritten (to Keep lines) when it
// holds twice as many. A write to the file that fails (a full disk) is
// logged and counted; the change it records was already committed.
type Log struct {
	path string
	keep int
	log  *slog.Logger
	now  func() time.Time
	// OnWriteError, when set, is told of each failed file write (a metric).
	OnWriteError func(error)

	mu      sync.Mutex
	entries []Entry // oldest first, at most keep
	seq     uint64
	lines   int // lines in the file
	// torn: the file does not end in a newline (a crash mid-write); the
	// next append starts with one so the torn line does not eat it.
	torn bool
}

// Open loads the newest keep entries of path (created when missing; ""
// keeps entries in memory only). A line that does not decode is skipped
// and logged: one damaged line must not hide the rest of the trail.
func Open(path string, keep int, log *slog.Logger) (*Log, error) {
	if keep <= 0 {
		keep = DefaultKeep
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{path: path, keep: keep, log: log, now: time.Now}
	if path == "" {
		return l, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit trail %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l.lines++
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			log.Warn("audit trail: skipping a line that does not decode", "path", path, "line", n, "err", err)
			continue
		}
		l.push(e)
		l.seq = max(l.seq, e.Seq)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit trail %s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			l.torn = true
		}
	}
	return l, nil
}

func (l *Log) push(e Entry) {
	l.entries = append(l.entries, e)
	if len(l.entries) > l.keep {
		l.entries = append(l.entries[:0:0], l.entries[len(l.entries)-l.keep:]...)
	}
}

// Record implements Recorder.
func (l *Log) Record(a Actor, changes []Change) {
	if len(changes) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UTC()
	client := ""
	if a.Client.IsValid() {
		client = a.Client.String()
	}
	var buf bytes.Buffer
	for i, c := range changes {
		if i == MaxPerChange {
			c = Change{Object: fmt.Sprintf("%d more objects", len(changes)-MaxPerChange), Action: More}
		}
		l.seq++
		e := Entry{Seq: l.seq, Time: now, Identity: a.Identity, Source: a.Source, Client: client,
			Object: c.Object, Action: c.Action, Before: c.Before, After: c.After}
		l.push(e)
		l.log.Info("audit", "seq", e.Seq, "identity", e.Identity, "source", e.Source, "client", e.Client,
			"object", e.Object, "action", e.Action, "before", e.Before, "after", e.After)
		b, _ := json.Marshal(e)
		buf.Write(b)
		buf.WriteByte('\n')
		if i == MaxPerChange {
			break
		}
	}
	if l.path != "" {
		if err := l.append(buf.Bytes()); err != nil {
			l.log.Error("audit trail: could not write the file (the entries are kept in memory)", "path", l.path, "err", err)
			if l.OnWriteError != nil {
				l.OnWriteError(err)
			}
		}
	}
}

func (l *Log) append(b []byte) error {
	n := bytes.Count(b, []byte{'\n'})
	if l.lines+n > 2*l.keep {
		return l.rewrite()
	}
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if l.torn {
		b = append([]byte{'\n'}, b...)
	}
	_, err = f.Write(b)
	if err == nil {
		l.torn = false
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		l.lines += n
	}
	return err
}

// rewrite replaces the file with the entries held (the newest keep).
func (l *Log) rewrite() error {
	var buf bytes.Buffer
	for _, e := range l.entries {
		b, _ := json.Marshal(e)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(l.path), ".audit-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(buf.Bytes())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), l.path)
	}
	if err == nil {
		l.lines = len(l.entries)
	}
	return err
}

// Entries returns the newest limit entries (all when limit <= 0), newest first.
func (l *Log) Entries(limit int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.entries)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Entry, 0, limit)
	for i := n - 1; i >= n-limit; i-- {
		out = append(out, l.entries[i])
	}
	return out
}
