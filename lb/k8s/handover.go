package k8s

// Handover at once: a waiting instance campaigns again as soon as the Lease
// is released, not at its next retry.
//
// client-go's elector tries to acquire once every RetryPeriod (+ up to
// 120 % jitter): with the default 15 s lease that is 2.1–4.7 s, so a
// released Lease stood free for seconds (0.5 s and 3.4 s measured with two
// daemons, issue 35). A shorter RetryPeriod would also shorten the leader's
// renewals (the same period) for every instance all the time. Instead every
// instance watches the Lease; when a release shows (what client-go's
// release writes: no holder), the waiting elector is replaced by a new one,
// whose first attempt runs at once and finds the Lease free. Acquisition
// itself stays client-go's: an update with the resourceVersion it read, so
// of two candidates racing for a released Lease exactly one wins.
//
// Only a release restarts the elector: a new elector has not observed the
// current holder yet and counts the lease duration from its own first read,
// so restarting it on other events would push back the takeover of a
// holder that died without releasing (kill -9 stays bounded by the lease
// duration plus one retry).

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// released reports whether l is a Lease no one holds: client-go's release
// writes an empty holderIdentity (leaderelection.tryRelease).
func released(l *coordinationv1.Lease) bool {
	return l != nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "")
}

// watchReleases starts an informer on the one Lease and returns a channel
// that holds a value after each release seen (a pending value is not
// repeated: one restart serves any number of releases). It never blocks the
// controller's start: without the informer (no list/watch permission) the
// elector still acquires at its retries.
func (c *Controller) watchReleases(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	f := informers.NewSharedInformerFactoryWithOptions(c.cs, 0,
		informers.WithNamespace(c.opts.LeaseNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.opts.LeaseName).String()
		}))
	inf := f.Coordination().V1().Leases().Informer()
	seen := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok && released(l) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, n any) { seen(n) },
	}); err != nil {
		c.opts.Logger.Warn("lease watch: cannot add handler; takeover waits for the elector's retries", "err", err)
		return ch
	}
	f.Start(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	return ch
}

// campaign runs le until it returns (leadership lost, or ctx ended), or
// until a release is seen while le does not lead: then le is stopped, and
// the caller's next elector tries at once. A release seen while leading is
// one that came before this term (or our own, at shutdown): ignored.
func (c *Controller) campaign(ctx context.Context, le interface {
	Run(context.Context)
	IsLeader() bool
}, releases <-chan struct{}) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); le.Run(cctx) }()
	for {
		select {
		case <-done:
			return
		case <-releases:
			if !le.IsLeader() {
				c.m.handovers.Inc()
				cancel()
				<-done
				return
			}
		}
	}
}
