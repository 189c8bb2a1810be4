package k8s

// One leadership term: its state, lead (adopt, then the workers), the
// start order and the service and pool workers.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgelb/edgelb/lb"
)

// term is the state of one leadership term; a new term starts from what the
// API says, never from memory of an earlier one.
type term struct {
	ctx   context.Context
	svcQ  workqueue.TypedRateLimitingInterface[string]
	poolQ workqueue.TypedRateLimitingInterface[string]
	// statusQ: Service status writes, an effect of decided (status.go).
	statusQ workqueue.TypedRateLimitingInterface[string]

	// The fields below belong to the keeper once the term is handed to it
	// (keeper.go): workers change and read them only inside c.do. Before
	// that, lead fills them (adopt) while no other goroutine can see t.
	alloc   Allocator
	pools   poolSet
	reqs    map[string]intentKey // last request each Service was served with
	pending map[string]string    // Service key → why it has no (complete) address
	invalid map[string]bool      // Service keys whose pending reason is a request edgelb cannot read
	warned  map[string]string    // last Warning sent per object, to not repeat it
	adopted []string             // Services whose addresses adoption loaded
	// decided is the leader's decision per Service it reconciled: what its
	// dataplane programs (buildDesired) and what statusQ writes. stripped:
	// addresses to remove from the status of a Service no longer ours.
	decided  map[string][]netip.Addr
	stripped map[string][]netip.Addr
}

// lead is one leadership term. It ends when the Lease is lost (lctx) or
// the controller stops (runCtx).
func (c *Controller) lead(runCtx, lctx context.Context) {
	// One term at a time: client-go starts OnStartedLeading on its own
	// goroutine, so a next term may begin while this one winds down.
	mine := make(chan struct{})
	defer close(mine)
	var prev chan struct{}
	if !c.do(func(k *keeper) { prev, k.termDone = k.termDone, mine }) {
		return
	}
	if prev != nil {
		<-prev
	}
	ctx, cancel := context.WithCancel(lctx)
	defer cancel()
	stop := context.AfterFunc(runCtx, cancel)
	defer stop()
	if runCtx.Err() != nil || lctx.Err() != nil {
		return
	}
	log := c.opts.Logger.With("identity", c.opts.Identity)
	log.Info("leading: loading assignments")
	t := &term{
		ctx:     ctx,
		svcQ:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgelb-services"}),
		poolQ:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgelb-pools"}),
		alloc:   c.newAlloc(),
		reqs:    map[string]intentKey{},
		pending: map[string]string{},
		invalid: map[string]bool{},
		warned:  map[string]string{},
		statusQ: newStatusQueue(),
		decided: map[string][]netip.Addr{}, stripped: map[string][]netip.Addr{},
	}
	defer t.svcQ.ShutDown()
	defer t.poolQ.ShutDown()
	defer t.statusQ.ShutDown()
	t0 := time.Now()
	n, err := c.adopt(ctx, t)
	for err != nil {
		log.Error("leading: cannot load current assignments; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		t.alloc, t.adopted = c.newAlloc(), nil
		n, err = c.adopt(ctx, t)
	}
	c.m.syncSeconds.WithLabelValues("adopt").Observe(time.Since(t0).Seconds())
	log.Info("leading: assignments loaded", "addresses", n, "after", time.Since(t0))

	// Hand t to the keeper: from now on only it touches t's state.
	c.do(func(k *keeper) { k.term, k.dirty, k.bump = t, true, true })
	c.m.leader.Set(1)
	defer func() {
		c.do(func(k *keeper) {
			c.stepDown(k, t)
			k.term, k.dirty, k.bump = nil, true, true
		})
		c.kickDesired() // from Service status again, as a follower (and the decisions not yet seen there)
		c.m.leader.Set(0)
		c.m.pending.Set(0)
	}()
	t.poolQ.Add(keyStatus)
	for _, k := range c.startOrder() {
		t.svcQ.Add(k)
	}
	// Also every Service adoption saw: one deleted between that List and
	// now (its event fell before the term began) must release its addresses.
	for _, k := range t.adopted {
		t.svcQ.Add(k)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); c.serviceWorker(t) }()
	go func() { defer wg.Done(); c.poolWorker(t) }()
	go func() { defer wg.Done(); c.statusWorker(t) }()
	<-ctx.Done()
	t.svcQ.ShutDown()
	t.poolQ.ShutDown()
	t.statusQ.ShutDown()
	wg.Wait()
	log.Info("stopped leading")
}

// adopt loads every Service's current ingress addresses into a fresh
// allocator BEFORE anything is allocated: what the API says is in use stays
// in use. It reads Services straight from the API (not the cache, which may
// lag writes of the previous leader). t is not yet the keeper's: only this
// goroutine sees it.
func (c *Controller) adopt(ctx context.Context, t *term) (int, error) {
	t.pools = c.currentPools()
	if _, err := t.alloc.ReplacePools(t.pools.Valid); err != nil {
		return 0, fmt.Errorf("set pools: %w", err)
	}
	var svcs []corev1.Service
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.cs.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("list services: %w", err)
		}
		svcs = append(svcs, list.Items...)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	sortServices(svcs)
	n := 0
	for i := range svcs {
		svc := &svcs[i]
		if !c.opts.ours(svc) {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		in, _ := parseIntent(svc, c.ownAddrs()) // a bad annotation must not free an address in use
		if c.noAdopt {
			continue
		}
		for _, ip := range ingressIPs(svc) {
			if err := t.alloc.Adopt(key, ip, in.Req); err != nil {
				// Another (older) Service holds it, or it left every pool:
				// the reconcile of this Service sorts it out and says so.
				c.opts.Logger.Warn("cannot keep address from status", "service", key, "ip", ip, "err", err)
				continue
			}
			n++
		}
		// t.reqs stays unset: the first reconcile re-checks every adopted
		// address against the Service's current spec (it may have been
		// edited while no leader was running).
		t.adopted = append(t.adopted, key)
	}
	return n, nil
}

// currentPools validates the IPPool objects in the cache.
func (c *Controller) currentPools() poolSet {
	var objs []*unstructured.Unstructured
	for _, o := range c.poolInf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			objs = append(objs, u)
		}
	}
	return computePools(objs, c.parsePool)
}

func (c *Controller) serviceWorker(t *term) {
	for {
		key, quit := t.svcQ.Get()
		if quit {
			return
		}
		t0 := time.Now()
		err := c.reconcileService(t, key)
		c.m.syncSeconds.WithLabelValues("service").Observe(time.Since(t0).Seconds())
		if err != nil && t.ctx.Err() == nil {
			c.opts.Logger.Debug("service sync failed; retrying", "service", key, "err", err)
			t.svcQ.AddRateLimited(key)
		} else {
			t.svcQ.Forget(key)
		}
		t.svcQ.Done(key)
	}
}

func (c *Controller) poolWorker(t *term) {
	for {
		key, quit := t.poolQ.Get()
		if quit {
			return
		}
		t0 := time.Now()
		var err error
		switch key {
		case keyPools:
			c.syncPools(t)
		case keyStatus:
			err = c.writePoolStatus(t)
		}
		c.m.syncSeconds.WithLabelValues("pools").Observe(time.Since(t0).Seconds())
		if err != nil && t.ctx.Err() == nil {
			c.opts.Logger.Debug("pool sync failed; retrying", "key", key, "err", err)
			t.poolQ.AddRateLimited(key)
		} else {
			t.poolQ.Forget(key)
		}
		t.poolQ.Done(key)
	}
}

var errNotLeader = errors.New("not the leader")

// lb's allocator is the one the controller uses.
var _ Allocator = (*lb.Allocator)(nil)

// startOrder is the order a new term reconciles Services in: those that
// request specific addresses first, then the rest, each by key — after the
// adoption pass has restored every address already in a status. So no
// automatic allocation can take an address a Service asks for, and the
// result does not depend on names or informer order (issue 13). The queue
// has one worker, so this is the order of allocation.
func (c *Controller) startOrder() []string {
	keys := c.svcInf.GetStore().ListKeys()
	sort.Strings(keys)
	var req, rest []string
	for _, k := range keys {
		o, ok, _ := c.svcInf.GetStore().GetByKey(k)
		svc, isSvc := o.(*corev1.Service)
		if ok && isSvc {
			if in, err := parseIntent(svc, c.ownAddrs()); err == nil && len(in.Requested) > 0 {
				req = append(req, k)
				continue
			}
		}
		rest = append(rest, k)
	}
	out := append(req, rest...)
	if c.noAdopt {
		// The churn test's negative control: without adoption a new term
		// must visibly break assignments; reconciling in the reverse of the
		// order the previous term used makes sure it does, rather than
		// re-deriving the same addresses by luck of a deterministic order.
		slices.Reverse(out)
	}
	return out
}
