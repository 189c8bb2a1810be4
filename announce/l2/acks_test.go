package l2

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestAcksRecordTheLastProbeAnswer(t *testing.T) {
	now := time.Unix(1000, 0)
	k := &acks{now: func() time.Time { return now }}
	if !k.lastAck("gw-b").IsZero() {
		t.Fatal("an ack before any probe")
	}
	k.NotifyPingComplete(&memberlist.Node{Name: "gw-b"}, time.Millisecond, nil)
	now = now.Add(time.Second)
	k.NotifyPingComplete(&memberlist.Node{Name: "gw-c"}, time.Millisecond, nil)
	k.NotifyPingComplete(nil, 0, nil)
	if got := k.lastAck("gw-b"); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("gw-b last ack %v, want 1000 s", got.Unix())
	}
	if got := k.lastAck("gw-c"); !got.Equal(time.Unix(1001, 0)) {
		t.Errorf("gw-c last ack %v, want 1001 s", got.Unix())
	}
	var none *acks
	if !none.lastAck("gw-b").IsZero() {
		t.Error("alone: an ack")
	}
}

// A member's row carries the time of its last probe answer; once it is
// dead that time stands still, before the time it was declared dead.
func TestClusterStatusShowsLastAck(t *testing.T) {
	c := newCluster(t)
	a := c.start("gw-a")
	c.start("gw-b")
	peer := func() (p struct {
		state      string
		since, ack time.Time
	}) {
		for _, ps := range a.a.Status().Peers[1:] {
			if ps.Name == "gw-b" {
				p.state, p.since, p.ack = ps.State, ps.Since, ps.LastPacket
			}
		}
		return p
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 30 s; gw-b %+v", what, peer())
			}
		}
	}
	waitUntil("gw-b alive and heard", func() bool { p := peer(); return p.state == "alive" && !p.ack.IsZero() })
	first := peer().ack
	waitUntil("gw-b heard again", func() bool { return peer().ack.After(first) })
	c.kill("gw-b")
	waitUntil("gw-b dead", func() bool { return peer().state == "dead" })
	dead := peer()
	if !dead.ack.Before(dead.since) {
		t.Errorf("gw-b's last ack %v is not before its death %v", dead.ack, dead.since)
	}
	time.Sleep(300 * time.Millisecond) // more than a probe interval
	if again := peer(); !again.ack.Equal(dead.ack) {
		t.Errorf("a dead member answered a probe: last ack %v, then %v", dead.ack, again.ack)
	}
}
