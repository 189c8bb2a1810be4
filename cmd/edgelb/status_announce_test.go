package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
)

// stubReporter reports a fixed status.
type stubReporter announce.Status

func (s stubReporter) Status() announce.Status { return announce.Status(s) }

func testAnnouncers(now time.Time) []announce.Reporter {
	q0, q51 := uint64(0), uint64(51)
	return []announce.Reporter{
		stubReporter{Kind: "l2", Owned: []string{"192.0.2.10"}, Owners: map[string]string{"192.0.2.10": "gw1", "192.0.2.11": "gw2"},
			Peers: []announce.PeerState{
				{Name: "gw1", Address: "10.0.0.1:7946", State: "alive", Detail: "self, ready, serves 3, owns 1"},
				{Name: "gw2", Address: "10.0.0.2:7946", State: "alive", Since: now.Add(-time.Hour), LastPacket: now.Add(-300 * time.Millisecond),
					Silence: 300 * time.Millisecond, Detail: "ready, serves 3, owns 1"},
				{Name: "gw3", Address: "10.0.0.3:7946", State: "dead", Since: now.Add(-time.Minute), LastPacket: now.Add(-63 * time.Second),
					Silence: 63 * time.Second, Detail: "since 12:00:00"},
			}},
		stubReporter{Kind: "bgp", Owned: []string{"192.0.2.10/32", "192.0.2.11/32"}, Peers: []announce.PeerState{
			{Name: "r1", Address: "10.0.0.254:179", State: "Established", Since: now.Add(-90 * time.Minute), Detail: "up 1h30m0s, AS 64500, from 10.0.0.1"},
			{Name: "r2", Address: "10.0.1.254:179", State: "Active", Detail: "connection refused"},
		}},
		stubReporter{Kind: "statesync", Peers: []announce.PeerState{
			{Name: "conntrackd", Address: "udp …", State: "running"},
			{Name: "sync peer", Address: "10.0.2.2", State: "alive", LastPacket: now.Add(-200 * time.Millisecond), Silence: 200 * time.Millisecond, Queue: &q0},
			{Name: "sync peer", Address: "10.0.2.3", State: "dead", LastPacket: now.Add(-1700 * time.Millisecond), Silence: 1700 * time.Millisecond, Queue: &q51},
		}},
	}
}

func TestAnnouncementsTable(t *testing.T) {
	now := time.Unix(100000, 0)
	var as []announce.Status
	for _, r := range testAnnouncers(now) {
		as = append(as, r.Status())
	}
	a := announcements(as, map[string]string{"192.0.2.10": "web", "192.0.2.11": "api", "192.0.2.12": "db"})
	var b strings.Builder
	if err := writeAnnouncementsTable(&b, a, now); err != nil {
		t.Fatal(err)
	}
	want := `
VIP        Service L2 owner           BGP
192.0.2.10 web     gw1 (this gateway) announced
192.0.2.11 api     gw2                announced
192.0.2.12 db      -                  not announced

BGP peer Address        State       Up      BFD Detail
r1       10.0.0.254:179 Established 1h30m0s -   up 1h30m0s, AS 64500, from 10.0.0.1
r2       10.0.1.254:179 Active      -       -   connection refused

L2 member Address       State Last packet Detail
gw2       10.0.0.2:7946 alive 0.3s ago    ready, serves 3, owns 1
gw3       10.0.0.3:7946 dead  1m3s ago    since 12:00:00

Sync peer State Queue Last packet
10.0.2.2  alive 0     0.2s ago
10.0.2.3  dead  51    1.7s ago
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	// The same in JSON, for scripts.
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back statusAnnouncements
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.SyncPeers) != 2 || back.SyncPeers[1].State != "dead" || *back.SyncPeers[1].Queue != 51 ||
		back.SyncPeers[1].Silence != 1700*time.Millisecond || !back.SyncPeers[1].LastPacket.Equal(now.Add(-1700*time.Millisecond)) {
		t.Errorf("sync peers in JSON: %s", raw)
	}
	if len(back.VIPs) != 3 || back.VIPs[0].L2Owner != "gw1" || !back.VIPs[0].L2Self || back.VIPs[2].BGP != "not announced" {
		t.Errorf("VIPs in JSON: %s", raw)
	}
	if len(back.Sessions) != 2 || !back.Sessions[0].Since.Equal(now.Add(-90*time.Minute)) || len(back.Members) != 2 {
		t.Errorf("sessions and members in JSON: %s", raw)
	}
}

// Through the CLI against a real API server with announcers.
func TestStatusShowsAnnouncements(t *testing.T) {
	url := apiServerReporting(t, nil, nil, nil, testAnnouncers(time.Now()))
	out, err := run(t, "status", "--server", url)
	if err != nil || !strings.Contains(out, "\nSync peer State Queue Last packet\n10.0.2.2  alive 0     0.2s ago\n10.0.2.3  dead  51    1.7s ago\n") ||
		!strings.Contains(out, "192.0.2.10 -       gw1 (this gateway)") {
		t.Fatalf("status:\n%s\nerr %v", out, err)
	}
	out, err = run(t, "status", "--server", url, "-o", "json")
	var rep statusReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Announcements.SyncPeers) != 2 || rep.Announcements.SyncPeers[1].State != "dead" {
		t.Fatalf("status -o json: %s %v", out, err)
	}
}
