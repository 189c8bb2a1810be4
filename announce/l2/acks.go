package l2

// When each member was last heard from: memberlist's own probes. Every
// ProbeInterval memberlist probes one member in turn and the member's ack
// comes back to NotifyPingComplete (memberlist.PingDelegate), so a live
// member is heard at least every members × ProbeInterval; a member's status
// row shows when its last ack came (issue 35: the time of the last packet,
// beside memberlist's alive/suspect/dead).

import (
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// acks is written only by memberlist's probe goroutine (NotifyPingComplete)
// and read by Status.
type acks struct {
	mu   sync.Mutex
	last map[string]time.Time
	now  func() time.Time // nil: time.Now
}

var _ memberlist.PingDelegate = (*acks)(nil)

// AckPayload implements memberlist.PingDelegate: no payload.
func (*acks) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: other answered a
// probe just now.
func (k *acks) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	if other == nil {
		return
	}
	t := time.Now()
	if k.now != nil {
		t = k.now()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last == nil {
		k.last = map[string]time.Time{}
	}
	k.last[other.Name] = t
}

// lastAck is when member name last answered a probe (zero: never).
func (k *acks) lastAck(name string) time.Time {
	if k == nil {
		return time.Time{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last[name]
}
