package statesync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestHeard(t *testing.T) {
	for _, c := range []struct {
		prev, cur uint64
		first     bool
		want      bool
	}{
		{0, 0, true, false},  // first read, nothing received yet
		{0, 5, true, true},   // first read, packets already counted
		{5, 5, false, false}, // stopped
		{5, 9, false, true},  // grew
		{9, 3, false, true},  // restarted, packets since
		{9, 0, false, false}, // restarted, none since
	} {
		if got := heard(c.prev, c.cur, c.first); got != c.want {
			t.Errorf("heard(%d, %d, first %v) = %v, want %v", c.prev, c.cur, c.first, got, c.want)
		}
	}
}

func TestPeerView(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		now     time.Time
		running bool
		since   time.Time
		state   string
		silence time.Duration
	}{
		{t0, true, time.Time{}, PeerUnknown, 0},
		{t0.Add(PeerDeadAfter), true, t0, PeerAlive, PeerDeadAfter},
		{t0.Add(PeerDeadAfter + time.Millisecond), true, t0, PeerDead, PeerDeadAfter + time.Millisecond},
		{t0.Add(time.Hour), false, t0, PeerUnknown, time.Hour},
		{t0.Add(-time.Second), true, t0, PeerAlive, 0}, // a clock step back is no negative silence
	} {
		st, sil := peerView(c.now, c.running, c.since)
		if st != c.state || sil != c.silence {
			t.Errorf("peerView(%v, %v, %v) = %s %v, want %s %v", c.now.Sub(t0), c.running, c.since, st, sil, c.state, c.silence)
		}
	}
}

// fakeClient is a conntrackd client that prints what the test wrote into
// its directory: "stats" for -s, "queue" for -s queue.
func fakeClient(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "conntrackd")
	script := "#!/bin/sh\nd=$(dirname \"$2\")\nif [ \"$4\" = queue ]; then cat \"$d/queue\"; else cat \"$d/stats\"; fi\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func writeCounters(t *testing.T, dir string, recv, unacked int) {
	t.Helper()
	stats := fmt.Sprintf("UDP traffic (active device=sync0):\n  840 Bytes sent  9712 Bytes recv\n  12 Pckts sent  %d Pckts recv\n", recv)
	queue := fmt.Sprintf("queue rsqueue:\ncurrent elements:\t%d\n", unacked)
	if err := os.WriteFile(filepath.Join(dir, "stats"), []byte(stats), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "queue"), []byte(queue), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The last packet is stamped by the read that first saw it and kept while
// the counter stands still; the peer is dead once silent for longer than
// PeerDeadAfter, measured from that stamp, and alive again with the next
// packet. A restarted conntrackd's count from 0 is no packet.
func TestRefreshStampsTheLastPacket(t *testing.T) {
	bin, dir := fakeClient(t)
	now := time.Unix(1000, 0)
	c := &Conntrackd{opts: Options{Binary: bin, Dir: dir}, running: true, clock: func() time.Time { return now }}
	ctx := context.Background()
	at := func(d time.Duration) { now = time.Unix(1000, 0).Add(d) }

	writeCounters(t, dir, 0, 0)
	c.refresh(ctx, true)
	if st := c.Status(); st.PeerState != PeerAlive || !st.LastPacket.IsZero() || st.PeerSilence != 0 {
		t.Fatalf("first read, nothing received: %s last %v silence %v", st.PeerState, st.LastPacket, st.PeerSilence)
	}
	at(2 * time.Second)
	if st := c.Status(); st.PeerState != PeerDead || st.PeerSilence != 2*time.Second {
		t.Fatalf("never heard for 2 s: %s silence %v, want dead 2 s", st.PeerState, st.PeerSilence)
	}

	writeCounters(t, dir, 31, 4)
	at(3 * time.Second)
	c.refresh(ctx, true)
	heardAt := now
	at(3*time.Second + PeerPoll)
	c.refresh(ctx, false) // unchanged: the stamp stays; the queue is kept
	st := c.Status()
	if st.PeerState != PeerAlive || !st.LastPacket.Equal(heardAt) || st.PeerSilence != PeerPoll || st.Stats.RecvPackets != 31 || st.Stats.Unacked != 4 {
		t.Fatalf("heard at 3 s, read at 3.2 s: %s last %v silence %v stats %+v", st.PeerState, st.LastPacket.Sub(time.Unix(1000, 0)), st.PeerSilence, st.Stats)
	}
	at(3*time.Second + PeerDeadAfter + time.Millisecond)
	c.refresh(ctx, true)
	if st := c.Status(); st.PeerState != PeerDead || st.PeerSilence != PeerDeadAfter+time.Millisecond || !st.LastPacket.Equal(heardAt) {
		t.Fatalf("silent since 3 s: %s silence %v last %v, want dead", st.PeerState, st.PeerSilence, st.LastPacket)
	}

	writeCounters(t, dir, 0, 0) // conntrackd restarted, nothing received yet
	at(6 * time.Second)
	c.refresh(ctx, true)
	if st := c.Status(); st.PeerState != PeerDead || !st.LastPacket.Equal(heardAt) {
		t.Fatalf("restarted, nothing received: %s last %v, want dead since 3 s", st.PeerState, st.LastPacket)
	}
	writeCounters(t, dir, 2, 0)
	at(7 * time.Second)
	c.refresh(ctx, true)
	if st := c.Status(); st.PeerState != PeerAlive || !st.LastPacket.Equal(now) || st.PeerSilence != 0 {
		t.Fatalf("packets after the restart: %s last %v silence %v, want alive now", st.PeerState, st.LastPacket, st.PeerSilence)
	}
	c.running = false
	if st := c.Status(); st.PeerState != PeerUnknown {
		t.Fatalf("local conntrackd down: %s, want unknown", st.PeerState)
	}
}

func TestWorse(t *testing.T) {
	if worse(PeerAlive, PeerDead) != PeerDead || worse(PeerDead, PeerUnknown) != PeerDead || worse(PeerAlive, PeerUnknown) != PeerUnknown || worse(PeerAlive, PeerAlive) != PeerAlive {
		t.Error("order: dead, unknown, alive")
	}
}
