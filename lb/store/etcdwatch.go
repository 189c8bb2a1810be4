package store

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Health is nil while the last quorum probe succeeded and the watch keeps
// up with the quorum; else the quorum's error (ErrUnavailable) or the
// watch's (ErrWatchBehind).
func (s *Etcd) Health() error {
	if err := s.quorum(); err != nil {
		return err
	}
	if p := s.behind.Load(); p != nil {
		return *p
	}
	return nil
}

// quorum is the last probe's verdict: nil, or ErrUnavailable.
func (s *Etcd) quorum() error {
	if p := s.health.Load(); p != nil {
		return *p
	}
	return nil
}

// setHealth records the probe's verdict. Going down, it looks for a TLS
// refusal to name (etcdcall.go), once per outage.
func (s *Etcd) setHealth(ctx context.Context, err error) {
	was := s.quorum()
	if err == nil {
		s.health.Store(nil)
		s.tlsErr = nil
		if was != nil {
			// Back: whatever happened meanwhile is read whole.
			s.log.Info("etcd store reachable with quorum: resyncing")
			s.force.Store(true)
			s.notify()
		}
		return
	}
	if was == nil {
		s.tlsErr = s.tlsProblem(ctx)
	}
	if s.tlsErr != nil {
		err = s.tlsErr
	}
	err = s.unavailable(err)
	s.health.Store(&err)
	if was == nil {
		s.log.Warn("etcd store unavailable: forwarding what is programmed, refusing writes", "err", err)
	}
}

// probe checks quorum every ProbeInterval with a linearizable read of
// meta/commit (require-leader, attempts: etcdcall.go), and with it the
// watch.
func (s *Etcd) probe(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		var resp *clientv3.GetResponse
		err := s.call(ctx, func(ctx context.Context) (err error) {
			resp, err = s.cli.Get(ctx, s.prefix+etcdKeyCommit)
			return err
		})
		if ctx.Err() != nil {
			return
		}
		s.setHealth(ctx, err)
		if err == nil {
			var rev int64
			if len(resp.Kvs) == 1 {
				rev = resp.Kvs[0].ModRevision
			}
			s.checkWatch(rev)
			s.presence(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkWatch compares the watch with the quorum. A watch is one stream to
// one member; on a member cut off from its peers it stays open and
// delivers nothing (etcd cancels require-leader streams only after three
// election timeouts without a leader), and this gateway would show a
// stale state as current. So: a commit the quorum held at the previous
// probe, a probe interval ago, that the watch has still not delivered
// marks the view behind (Health) and moves the watch: it is restarted
// where it stopped, on whichever member the client picks next, and a full
// relist is forced. The next probe clears the mark once the watch caught up.
func (s *Etcd) checkWatch(rev int64) {
	prev := s.probed
	s.probed = rev
	w := s.watched.Load()
	if prev <= w {
		if s.behind.Swap(nil) != nil {
			s.log.Info("etcd watch caught up", "revision", w)
		}
		return
	}
	err := fmt.Errorf("%w: the fleet's commit at revision %d not delivered by the watch (at %d) a probe interval later: watching from another member",
		ErrWatchBehind, prev, w)
	if s.behind.Swap(&err) == nil {
		s.log.Warn("etcd watch behind the quorum: restarting it", "err", err)
	}
	s.watchMu.Lock()
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.watchMu.Unlock()
}

// watch follows the prefix from the revision the schema was checked at,
// and signals every commit past the state loaded. A watch that ends (no
// leader, member lost, compaction, checkWatch) is restarted where it
// stopped, and a full relist is forced.
func (s *Etcd) watch(ctx context.Context) {
	defer s.wg.Done()
	for ctx.Err() == nil {
		// Require-leader: a member that has had no leader for a while
		// ends the stream (rpctypes.ErrNoLeader), and one without a leader
		// refuses to open it, so the watch moves to another member.
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		s.watchMu.Lock()
		s.stopWatch = cancel
		s.watchMu.Unlock()
		for resp := range s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(s.watched.Load()+1)) {
			if resp.CompactRevision != 0 {
				// Events were compacted away: read everything again.
				s.log.Info("etcd watch compacted: full relist", "revision", resp.CompactRevision)
				s.watched.Store(resp.CompactRevision - 1)
				break
			}
			if err := resp.Err(); err != nil {
				s.log.Debug("etcd watch ended", "err", err)
				break
			}
			for _, ev := range resp.Events {
				if string(ev.Kv.Key) == s.prefix+etcdKeyCommit && ev.Kv.ModRevision > s.latest.Load() {
					s.latest.Store(ev.Kv.ModRevision)
				}
			}
			if n := len(resp.Events); n > 0 {
				s.watched.Store(resp.Events[n-1].Kv.ModRevision)
				s.notify()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.force.Store(true)
		s.notify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
