package l2

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/hashicorp/memberlist"
)

// blockingHandover holds the keeper inside Gaining until released, as a
// slow conntrackd commit would.
type blockingHandover struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *blockingHandover) Gaining(context.Context, []netip.Addr) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return nil
}

func (h *blockingHandover) Released(context.Context, []netip.Addr, int) error { return nil }

// While the keeper is busy applying a decision (here: stuck in the
// handover hook), memberlist's callbacks, Status and Owned return at once:
// they post events or read the last snapshot, they never wait for the
// keeper. The events posted meanwhile are all applied once it is free.
func TestKeeperBusyNeverBlocksCallbacksOrReaders(t *testing.T) {
	h := &blockingHandover{entered: make(chan struct{}), release: make(chan struct{})}
	vip := netip.MustParseAddr("192.0.2.1")
	a, err := New(Config{Interface: "lo", ARP: NewFakeResponder(), NDP: NewFakeResponder(), Uplink: NewFakeUplink(true),
		Logger: quietLog, Handover: h})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(true)
	setDone := make(chan error, 1)
	go func() { setDone <- a.SetVIPs(context.Background(), []announce.VIP{{Addr: vip}}) }()
	<-h.entered

	peer := memberlist.Node{Name: "gw-x", Addr: []byte{127, 0, 0, 2}, Port: 7946}
	msg := nodeState{Name: "gw-x", Gen: 1, Healthy: true, Uplink: true, Settled: true}.marshal()
	d := &delegate{a: a}
	calls := make(chan string, 1)
	go func() {
		d.NotifyJoin(&peer)
		d.NotifyMsg(msg)
		if d.LocalState(false) == nil {
			calls <- "LocalState returned nothing"
			return
		}
		if st := a.Status(); len(st.Owned) != 0 {
			calls <- "Status shows owned VIPs before the responders were told"
			return
		}
		a.Owned()
		calls <- ""
	}()
	// 30 s for calls that take microseconds: only a real wait on the keeper
	// (which stays blocked until released below) can exceed it.
	select {
	case bad := <-calls:
		if bad != "" {
			t.Fatal(bad)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("memberlist callbacks or Status waited for the busy keeper")
	}
	close(h.release)
	if err := <-setDone; err != nil {
		t.Fatal(err)
	}
	// SetHealthy returns after the keeper's next round: a barrier.
	a.SetHealthy(true)
	st := a.Status()
	if len(st.Peers) != 2 || st.Peers[1].Name != "gw-x" || st.Peers[1].State != "alive" ||
		!strings.HasPrefix(st.Peers[1].Detail, "ready, serves 0") {
		t.Fatalf("events posted while the keeper was busy not applied: %+v", st.Peers)
	}
	if len(st.Owned) != 1 {
		t.Fatalf("owned %v, want [%s]", st.Owned, vip)
	}
}
