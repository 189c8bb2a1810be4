package audit

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestLogBoundedAndPersisted: the newest keep entries survive a reopen,
// the file is rewritten to keep lines once it holds twice as many, one
// commit writes at most MaxPerChange entries and a "more", and a damaged
// line is skipped, not fatal.
func TestLogBoundedAndPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := Actor{Identity: "ops", Source: "rest", Client: netip.MustParseAddr("192.0.2.7")}
	for i := range 25 {
		l.Record(a, []Change{{Object: fmt.Sprintf("pool/p%d", i), Action: Create, After: "x"}})
	}
	if es := l.Entries(0); len(es) != 10 || es[0].Seq != 25 || es[9].Seq != 16 || es[0].Client != "192.0.2.7" {
		t.Fatalf("in memory: %d entries, first %+v", len(es), es[0])
	}
	if n := lines(t, path); n > 20 {
		t.Errorf("file holds %d lines, want at most 2 × 10", n)
	}
	// A torn last line (a crash mid-write) and a reopen.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":26,"obj`)
	f.Close()
	l2, err := Open(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	es := l2.Entries(3)
	if len(es) != 3 || es[0].Seq != 25 || es[0].Object != "pool/p24" || es[0].Identity != "ops" {
		t.Fatalf("after reopen: %+v", es)
	}
	many := make([]Change, MaxPerChange+7)
	for i := range many {
		many[i] = Change{Object: fmt.Sprintf("service/s%d", i), Action: Delete, Before: "y"}
	}
	l2.Record(Actor{Identity: "SIGHUP", Source: "reload"}, many)
	es = l2.Entries(0)
	if es[0].Action != More || es[0].Object != "7 more objects" || es[0].Seq != 25+MaxPerChange+1 {
		t.Errorf("a big change ends with %+v", es[0])
	}
	l3, err := Open(path, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if es := l3.Entries(1); len(es) != 1 || es[0].Action != More {
		t.Errorf("what was appended after the torn line: %+v", es)
	}
}

func lines(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}
