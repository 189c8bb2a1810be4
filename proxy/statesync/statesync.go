// Package statesync copies connection state between gateways so that an
// open connection survives the death of the gateway it went through. The
// nftables dataplane's connections live in the kernel's conntrack table;
// conntrack-tools' conntrackd (FTFW mode) carries them to the other gateways,
// and the failover steps conntrack-tools documents for a primary-backup pair
// (its primary-backup.sh) are run on the L2 ownership changes: before this
// gateway answers for a VIP, the state the others sent is committed into the
// kernel; after it gave up its last VIP, it asks for a resync and lets its
// own stale entries expire.
//
// Syncer is the declarative interface the announcer drives; Mesh is the real
// one (a supervised Conntrackd per peer, each a channel between two
// gateways), Fake records a transcript. Both take
// their steps from the same pure functions (Takeover, Release, Restart).
package statesync

import (
	"context"
	"net/netip"
	"time"
)

// Syncer is told of this gateway's L2 ownership changes.
type Syncer interface {
	// Gaining runs before this gateway starts answering for vips: the
	// connections another gateway carried must be in the kernel before
	// their next packet arrives here, or it would be tracked as new and
	// balanced afresh.
	Gaining(ctx context.Context, vips []netip.Addr) error
	// Released runs after this gateway stopped answering for vips; owned is
	// how many VIPs it still answers for.
	Released(ctx context.Context, vips []netip.Addr, owned int) error
	// Status reports the sync for the API, the page and the metrics.
	Status() Status
	// Close stops the sync (conntrackd is terminated).
	Close() error
}

// Step is one conntrackd client command of the failover procedure.
type Step string

const (
	StepCommit  Step = "commit"  // -c: commit the external cache (others' connections) into the kernel
	StepFlush   Step = "flush"   // -f: flush the internal and external caches
	StepResync  Step = "resync"  // -R: refill the internal cache from the kernel
	StepBulk    Step = "bulk"    // -B: send every owned connection to the others
	StepShorten Step = "shorten" // -t: shorten the kernel's timers (stale entries expire)
	StepRequest Step = "request" // -n: ask the others for their connections
)

// Flag is the conntrackd command-line flag of a step.
func (s Step) Flag() string {
	switch s {
	case StepCommit:
		return "-c"
	case StepFlush:
		return "-f"
	case StepResync:
		return "-R"
	case StepBulk:
		return "-B"
	case StepShorten:
		return "-t"
	case StepRequest:
		return "-n"
	}
	return ""
}

// Takeover is primary-backup.sh's "primary": the steps before answering for
// VIPs this gateway did not answer for.
func Takeover() []Step { return []Step{StepCommit, StepFlush, StepResync, StepBulk} }

// Release is primary-backup.sh's "backup", taken when this gateway answers
// for no VIP any more; while it still owns some it stays a primary (its
// timers must not be shortened under connections it carries).
func Release(owned int) []Step {
	if owned > 0 {
		return nil
	}
	return []Step{StepShorten, StepRequest}
}

// Restart is what a freshly started conntrackd needs: a primary (restarted
// while owning VIPs) sends its connections at once; a backup asks for the
// others' connections and lets entries left from before expire.
func Restart(primary bool) []Step {
	if primary {
		return []Step{StepResync, StepBulk}
	}
	return []Step{StepShorten, StepRequest}
}

// Status is the state of the sync.
type Status struct {
	Kind    string `json:"kind"`    // "conntrackd", "fake"
	Channel string `json:"channel"` // "udp 10.0.0.1 → 10.0.0.2:3780 on eth2"; a mesh joins its links' with ", "
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	// Restarts counts conntrackd starts after the first.
	Restarts int    `json:"restarts"`
	Role     string `json:"role"` // "primary" (owns VIPs) or "backup"
	// Peers are the configured destinations of the channel.
	Peers []string `json:"peers,omitempty"`
	Stats Stats    `json:"stats"`
	// Errors counts failed commands and unexpected exits.
	Errors    uint64 `json:"errors"`
	LastError string `json:"lastError,omitempty"`
	// LastTakeover is when the last Gaining ran and how long its steps took.
	LastTakeover     time.Time     `json:"lastTakeover,omitzero"`
	LastTakeoverTook time.Duration `json:"lastTakeoverNs,omitempty"`
	// Links are a Mesh's channels, one per peer, each with its own status
	// (Links empty for a single conntrackd); the fields above sum their
	// counters, and PeerSilence is the longest silence of any peer.
	Links []Status `json:"links,omitempty"`
	// PeerState is the peer's: alive, dead (silent for longer than
	// PeerDeadAfter) or unknown (not read yet, or the local conntrackd is
	// down); a Mesh's is its worst link's.
	PeerState string `json:"peerState"`
	// LastPacket is when a read of the counters first saw the last sync
	// packet from the peer (FTFW peers send one at least every second, an
	// alive message when idle): at most PeerPoll (and one read) after it
	// arrived; zero when none was seen. A Mesh's is its most silent link's.
	LastPacket time.Time `json:"lastPacket,omitzero"`
	// PeerSilence is how long no sync packet has arrived, measured from
	// LastPacket (from the first read when none was seen) to now; a Mesh's
	// is its most silent peer's.
	PeerSilence time.Duration `json:"peerSilenceNs"`
}

// Stats are conntrackd's own counters (`conntrackd -s`).
type Stats struct {
	Internal    uint64 `json:"internal"`    // connections of this gateway (internal cache)
	External    uint64 `json:"external"`    // connections received from others (external cache)
	SentPackets uint64 `json:"sentPackets"` // sync messages sent
	RecvPackets uint64 `json:"recvPackets"`
	SendErrors  uint64 `json:"sendErrors"`
	RecvErrors  uint64 `json:"recvErrors"`
	Lost        uint64 `json:"lost"` // sequence tracking: messages lost
	// The sync's lag (`conntrackd -s queue`): Unacked messages were sent and
	// not yet acknowledged by a peer (FTFW's resend queue; a healthy peer
	// acknowledges within about a second, so this stays near 0), Unsent
	// wait to be sent, ResendDropped were dropped because the resend queue
	// was full.
	Unacked       uint64 `json:"unacked"`
	Unsent        uint64 `json:"unsent"`
	ResendDropped uint64 `json:"resendDropped"`
}
