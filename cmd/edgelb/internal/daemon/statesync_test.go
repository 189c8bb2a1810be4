package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgelb/edgelb/proxy/statesync"
)

func TestSyncReporter(t *testing.T) {
	f := statesync.NewFake()
	st := syncReporter{f}.Status()
	if st.Kind != "statesync" || len(st.Peers) != 1 || st.Peers[0].State != "running" {
		t.Fatalf("status %+v", st)
	}
}

// stubSync reports a fixed status.
type stubSync struct {
	statesync.Syncer
	st statesync.Status
}

func (s stubSync) Status() statesync.Status { return s.st }

// A peer's row and metric carry the peer's own state, its last packet and
// its queue, whatever the local conntrackd's state.
func TestSyncPeerRowsAndMetric(t *testing.T) {
	last := time.Unix(1000, 0)
	link := func(peer, state string, silence time.Duration, unacked uint64) statesync.Status {
		return statesync.Status{Kind: "conntrackd", Channel: "udp 10.0.0.1 → " + peer + ":3780 on eth2", Running: true,
			Peers: []string{peer}, PeerState: state, LastPacket: last, PeerSilence: silence, Stats: statesync.Stats{Unacked: unacked}}
	}
	s := stubSync{st: statesync.Status{Kind: "conntrackd", Running: true, PeerState: statesync.PeerDead, Links: []statesync.Status{
		link("10.0.0.2", statesync.PeerAlive, 300*time.Millisecond, 1),
		link("10.0.0.3", statesync.PeerDead, 1700*time.Millisecond, 51),
	}}}
	st := syncReporter{s}.Status()
	if len(st.Peers) != 3 {
		t.Fatalf("rows %+v", st.Peers)
	}
	for i, want := range []struct {
		state   string
		silence time.Duration
		queue   uint64
	}{{"alive", 300 * time.Millisecond, 1}, {"dead", 1700 * time.Millisecond, 51}} {
		p := st.Peers[i+1]
		if p.State != want.state || p.Silence != want.silence || p.Queue == nil || *p.Queue != want.queue || !p.LastPacket.Equal(last) {
			t.Errorf("row %d: %+v, want %s silence %v queue %d", i+1, p, want.state, want.silence, want.queue)
		}
		if !strings.Contains(p.Detail, "conntrackd running") {
			t.Errorf("row %d detail %q", i+1, p.Detail)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&syncCollector{s: s})
	want := `
# HELP edgelb_statesync_peer_alive 1 while a sync peer is heard from (a packet within the last 1.5 s), 0 when dead or unknown.
# TYPE edgelb_statesync_peer_alive gauge
edgelb_statesync_peer_alive{peer="10.0.0.2"} 1
edgelb_statesync_peer_alive{peer="10.0.0.3"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgelb_statesync_peer_alive"); err != nil {
		t.Error(err)
	}
}
