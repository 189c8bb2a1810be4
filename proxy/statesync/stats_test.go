package statesync

import (
	"os"
	"testing"
)

// testdata/stats.txt has the layout of `conntrackd -s` (1.4.7, Debian 12,
// as printed in a namespace) with its counters set to distinct values.
func TestParseStats(t *testing.T) {
	b, err := os.ReadFile("testdata/stats.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseStats(string(b))
	want := Stats{Internal: 2, External: 100, SentPackets: 14, RecvPackets: 57, SendErrors: 1, RecvErrors: 0, Lost: 3}
	if got != want {
		t.Fatalf("ParseStats = %+v, want %+v", got, want)
	}
	if (ParseStats("")) != (Stats{}) {
		t.Fatal("empty output parsed as non-zero")
	}
}

// testdata/queue.txt is `conntrackd -s queue` (1.4.7) of a gateway whose
// peer was gone: 50 messages waiting for an acknowledgement.
func TestParseQueue(t *testing.T) {
	b, err := os.ReadFile("testdata/queue.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := Stats{Internal: 9}
	ParseQueue(string(b), &got)
	want := Stats{Internal: 9, Unacked: 50, Unsent: 3, ResendDropped: 7}
	if got != want {
		t.Fatalf("ParseQueue = %+v, want %+v", got, want)
	}
	// errorq's counters are not the resend queue's.
	var s Stats
	ParseQueue("queue errorq:\ncurrent elements: 5\nnot enough space errors: 2\n", &s)
	if s != (Stats{}) {
		t.Fatalf("errorq read as rsqueue/txqueue: %+v", s)
	}
}

// FuzzParseQueue: any output parses without a panic.
func FuzzParseQueue(f *testing.F) {
	if b, err := os.ReadFile("testdata/queue.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("queue rsqueue:\ncurrent elements: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		var st Stats
		ParseQueue(s, &st)
	})
}

// FuzzParseStats: any output parses without a panic.
func FuzzParseStats(f *testing.F) {
	if b, err := os.ReadFile("testdata/stats.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("cache internal:\ncurrent active connections:\t x\n")
	f.Add("1 2 3 4 5 6\n")
	f.Fuzz(func(t *testing.T, s string) { ParseStats(s) })
}
