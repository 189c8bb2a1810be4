package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// GatewayStatus is one gateway of a fleet as it reports itself under
// gateways/NAME: a key bound to a lease it keeps alive (5 s), so a gateway
// that stopped or lost quorum disappears from the list by itself.
type GatewayStatus struct {
	Name string `json:"name"`
	// Revision is the fleet commit revision its state is at (equal on every
	// gateway once converged).
	Revision int64 `json:"revision"`
	// Reported is when it last wrote its revision (it writes only when the
	// revision changed, at most once per probe interval).
	Reported time.Time `json:"reported"`
}

const (
	etcdGateways    = "gateways/"
	presenceLeaseTT = 5 // seconds
)

// presence keeps gateways/NAME current; called from the probe loop. It
// writes only when the revision changed (or the lease was lost), so an idle
// fleet adds no revisions (etcd keeps history until compacted).
func (s *Etcd) presence(ctx context.Context) {
	if s.o.Gateway == "" {
		return
	}
	ctx = clientv3.WithRequireLeader(ctx)
	if s.lease == 0 {
		lctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
		resp, err := s.cli.Grant(lctx, presenceLeaseTT)
		cancel()
		if err != nil {
			return
		}
		ka, err := s.cli.KeepAlive(ctx, resp.ID)
		if err != nil {
			return
		}
		s.lease, s.reported = resp.ID, -1
		go func() {
			for range ka { // drained; closed when the lease is lost or ctx ends
			}
			s.leaseLost.Store(true)
		}()
	}
	if s.leaseLost.Swap(false) {
		s.lease = 0
		return
	}
	rev := s.Revision()
	if rev == s.reported {
		return
	}
	b, _ := json.Marshal(GatewayStatus{Name: s.o.Gateway, Revision: rev, Reported: time.Now().UTC()})
	err := s.call(ctx, func(ctx context.Context) error { // the same value again: safe to resend
		_, err := s.cli.Put(ctx, s.prefix+etcdGateways+s.o.Gateway, string(b), clientv3.WithLease(s.lease))
		return err
	})
	if err == nil {
		s.reported = rev
	}
}

// Fleet lists the gateways that report themselves (a linearizable read:
// it fails with ErrUnavailable without quorum).
func (s *Etcd) Fleet(ctx context.Context) ([]GatewayStatus, error) {
	var resp *clientv3.GetResponse
	err := s.call(ctx, func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.prefix+etcdGateways, clientv3.WithPrefix())
		return err
	})
	if err != nil {
		return nil, s.unavailable(err)
	}
	out := make([]GatewayStatus, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var g GatewayStatus
		if err := json.Unmarshal(kv.Value, &g); err != nil {
			g = GatewayStatus{Name: strings.TrimPrefix(string(kv.Key), s.prefix+etcdGateways)}
			s.log.Warn("unreadable gateway status in etcd", "key", string(kv.Key), "err", err)
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Fleet on the fake: every handle, at its revision.
func (s *SharedMem) Fleet(context.Context) ([]GatewayStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, s.down)
	}
	var out []GatewayStatus
	for i, h := range s.handles {
		out = append(out, GatewayStatus{Name: fmt.Sprintf("gateway-%d", i), Revision: h.seen})
	}
	return out, nil
}

// Fleet of a handle is its SharedMem's.
func (h *SharedHandle) Fleet(ctx context.Context) ([]GatewayStatus, error) { return h.s.Fleet(ctx) }
