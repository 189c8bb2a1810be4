// Package k8s is edgelb's Kubernetes mode: LoadBalancer IPs from IPPool
// objects, written to Service status by the one Lease holder, and the
// dataplane's desired state (VIPs, node ports, backends from EndpointSlices)
// computed on every gateway. See README.md.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgelb/edgelb/lb"
)

// Controller is one gateway's Kubernetes mode. Every instance watches and
// computes its desired dataplane state; only the Lease holder allocates.
type Controller struct {
	opts     Options
	cs       kubernetes.Interface
	dyn      dynamic.Interface
	m        *metrics
	newAlloc NewAllocatorFunc
	// noAdopt disables restart safety (adoption of status addresses); only
	// tests set it, to show what the churn test catches without it.
	noAdopt bool

	factory    informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	svcInf     cache.SharedIndexInformer
	sliceInf   cache.SharedIndexInformer
	nodeInf    cache.SharedIndexInformer
	poolInf    cache.SharedIndexInformer
	nsInf      cache.SharedIndexInformer // labels, for serviceAllocation.namespaceSelectors
	services   corelisters.ServiceLister
	namespaces corelisters.NamespaceLister
	nodes      corelisters.NodeLister

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	refusedMu   sync.Mutex
	refused     map[string]string // Service key → last refusal Warning (refused.go)

	desiredQ workqueue.TypedRateLimitingInterface[string]
	synced   chan struct{}
	memo     map[string]memoEntry // desired worker only
	memoFP   string

	mu     sync.Mutex // guards term, last, built and subs
	term   *term      // nil unless leading
	last   lb.Desired
	built  bool // last was computed from synced caches
	subs   []chan lb.Desired
	leadMu sync.Mutex // one leadership term at a time

	// version moves after every change the Manager's lists can show
	// (Services, IPPools, pending reasons, leadership), so the web UI polls
	// for nothing while it holds (as lb/engine's Version).
	version atomic.Uint64
}

// changed bumps the version; called after the change is visible to readers.
func (c *Controller) changed() { c.version.Add(1) }

// term is the state of one leadership term; a new term starts from what the
// API says, never from memory of an earlier one.
type term struct {
	ctx   context.Context
	svcQ  workqueue.TypedRateLimitingInterface[string]
	poolQ workqueue.TypedRateLimitingInterface[string]
	// statusQ: Service status writes, an effect of decided (status.go).
	statusQ workqueue.TypedRateLimitingInterface[string]

	changed func() // the Controller's: after a pending reason changes

	mu      sync.Mutex // guards the fields below (svc and pool workers, Manager reads)
	alloc   Allocator
	pools   poolSet
	reqs    map[string]intentKey // last request each Service was served with
	pending map[string]string    // Service key → why it has no (complete) address
	warned  map[string]string    // last Warning sent per object, to not repeat it
	adopted []string             // Services whose addresses adoption loaded
	// decided is the leader's decision per Service it reconciled: what its
	// dataplane programs (buildDesired) and what statusQ writes. stripped:
	// addresses to remove from the status of a Service no longer ours.
	decided  map[string][]netip.Addr
	stripped map[string][]netip.Addr
}

const (
	keyPools  = "pools"  // revalidate IPPools and hand them to the allocator
	keyStatus = "status" // write IPPool status (size, used, Valid)
	keyAll    = "all"    // the one desired-state key
	sliceIdx  = "service"
)

// NewForConfig builds a Controller from a rest.Config.
func NewForConfig(cfg *rest.Config, opts Options) (*Controller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return New(cs, dyn, opts)
}

// New builds a Controller; Run starts it.
func New(cs kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Controller, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts: opts, cs: cs, dyn: dyn, m: newMetrics(opts.Registerer),
		newAlloc: func() Allocator { return lb.NewAllocator() },
		synced:   make(chan struct{}),
		desiredQ: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgelb-desired"}),
	}
	if opts.NewAllocator != nil {
		c.newAlloc = opts.NewAllocator
	}
	// Resync 0: no periodic relists; everything is driven by watch events.
	c.factory = informers.NewSharedInformerFactory(cs, 0)
	c.svcInf = c.factory.Core().V1().Services().Informer()
	c.services = c.factory.Core().V1().Services().Lister()
	c.sliceInf = c.factory.Discovery().V1().EndpointSlices().Informer()
	c.nodeInf = c.factory.Core().V1().Nodes().Informer()
	c.nodes = c.factory.Core().V1().Nodes().Lister()
	c.nsInf = c.factory.Core().V1().Namespaces().Informer()
	c.namespaces = c.factory.Core().V1().Namespaces().Lister()
	c.dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c.poolInf = c.dynFactory.ForResource(IPPoolGVR).Informer()

	if err := c.sliceInf.AddIndexers(cache.Indexers{sliceIdx: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
	}}); err != nil {
		return nil, err
	}
	c.broadcaster = record.NewBroadcaster()
	c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "edgelb", Host: opts.NodeName})

	if _, err := c.svcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.serviceChanged(obj) },
		UpdateFunc: func(_, obj any) { c.serviceChanged(obj) },
		DeleteFunc: func(obj any) { c.serviceChanged(obj) },
	}); err != nil {
		return nil, err
	}
	desired := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kickDesired() },
		UpdateFunc: func(any, any) { c.kickDesired() },
		DeleteFunc: func(any) { c.kickDesired() },
	}
	if _, err := c.sliceInf.AddEventHandler(desired); err != nil {
		return nil, err
	}
	if _, err := c.nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kickDesired() },
		UpdateFunc: func(o, n any) { c.nodeChanged(o, n) },
		DeleteFunc: func(any) { c.kickDesired() },
	}); err != nil {
		return nil, err
	}
	if _, err := c.nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.namespaceChanged(nil, obj) },
		UpdateFunc: func(o, n any) { c.namespaceChanged(o, n) },
	}); err != nil {
		return nil, err
	}
	if _, err := c.poolInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poolsChanged() },
		UpdateFunc: func(o, n any) { c.poolUpdated(o, n) },
		DeleteFunc: func(any) { c.poolsChanged() },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// desiredBatch coalesces bursts of events into one rebuild: a rebuild walks
// every Service, so doing one per event under churn would waste the CPU the
// allocation path needs.
const desiredBatch = 20 * time.Millisecond

func (c *Controller) kickDesired() { c.desiredQ.AddAfter(keyAll, desiredBatch) }

func keyOf(obj any) string {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return k
}

func (c *Controller) serviceChanged(obj any) {
	c.changed()
	c.kickDesired()
	if k := keyOf(obj); k != "" {
		c.mu.Lock()
		t := c.term
		c.mu.Unlock()
		if t != nil {
			t.svcQ.Add(k)
		}
	}
}

// nodeChanged ignores heartbeats: only addresses, labels and readiness matter.
func (c *Controller) nodeChanged(o, n any) {
	a, ok1 := o.(*corev1.Node)
	b, ok2 := n.(*corev1.Node)
	if ok1 && ok2 && nodeReady(a) == nodeReady(b) && fmt.Sprint(a.Status.Addresses) == fmt.Sprint(b.Status.Addresses) &&
		fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) {
		return
	}
	c.kickDesired()
}

func (c *Controller) poolsChanged() {
	c.changed()
	c.kickDesired()
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil {
		t.poolQ.Add(keyPools)
	}
}

// poolUpdated skips our own status writes (the spec generation is unchanged).
func (c *Controller) poolUpdated(o, n any) {
	a, ok1 := o.(*unstructured.Unstructured)
	b, ok2 := n.(*unstructured.Unstructured)
	if ok1 && ok2 && a.GetGeneration() == b.GetGeneration() && a.GetGeneration() != 0 {
		return
	}
	c.poolsChanged()
}

// Subscribe returns a channel that always holds the latest Desired (the
// standalone engine's contract: a value not yet read is replaced by a newer
// one; the writer never blocks). The current state is delivered at once if
// it was computed already; before the caches have synced nothing is sent,
// so a restarting gateway never programs an empty state over working rules.
func (c *Controller) Subscribe() <-chan lb.Desired {
	ch := make(chan lb.Desired, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built {
		ch <- c.last
	}
	c.subs = append(c.subs, ch)
	return ch
}

// IsLeader reports whether this instance currently assigns addresses.
func (c *Controller) IsLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term != nil
}

// WaitSynced blocks until the informers have synced or ctx ends.
func (c *Controller) WaitSynced(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs until ctx ends: informers, the desired-state worker and the
// leader election. On return the Lease is released unless KeepLeaseOnStop.
func (c *Controller) Run(ctx context.Context) error {
	log := c.opts.Logger
	// Without the CRD the pool informer would wait forever: say so instead.
	if err := c.checkCRD(); err != nil {
		return err
	}
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.cs.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.desiredQ.ShutDown()

	c.factory.Start(ctx.Done())
	c.dynFactory.Start(ctx.Done())
	defer c.factory.Shutdown()
	defer c.dynFactory.Shutdown()
	t0 := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), c.svcInf.HasSynced, c.sliceInf.HasSynced, c.nodeInf.HasSynced, c.poolInf.HasSynced, c.nsInf.HasSynced) {
		return fmt.Errorf("informer sync: %w", ctx.Err())
	}
	c.m.syncSeconds.WithLabelValues("informers").Observe(time.Since(t0).Seconds())
	close(c.synced)
	log.Info("kubernetes caches synced", "after", time.Since(t0))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.desiredWorker() }()
	c.kickDesired()

	// The elector's context outlives ctx until the leader's work has
	// stopped, so the Lease is never released while a write may be in flight.
	ectx, ecancel := context.WithCancel(context.Background())
	defer ecancel()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.opts.LeaseNamespace, Name: c.opts.LeaseName},
		Client:     c.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.Identity},
	}
	electDone := make(chan struct{})
	go func() {
		defer close(electDone)
		for ectx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: lock, Name: "edgelb",
				LeaseDuration: c.opts.LeaseDuration, RenewDeadline: c.opts.RenewDeadline, RetryPeriod: c.opts.RetryPeriod,
				ReleaseOnCancel: !c.opts.KeepLeaseOnStop,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(lctx context.Context) { c.lead(ctx, lctx) },
					OnStoppedLeading: func() {},
					OnNewLeader: func(id string) {
						log.Info("leader", "identity", id, "me", id == c.opts.Identity)
					},
				},
			})
			if err != nil {
				log.Error("leader election", "err", err)
				return
			}
			// Run returns when leadership is lost (its lead() sees lctx end;
			// leadMu keeps a next term from overlapping it), then campaign again.
			le.Run(ectx)
		}
	}()

	<-ctx.Done()
	// Stop leading first (workers finish their writes), then release the Lease.
	c.leadMu.Lock()
	c.leadMu.Unlock() //nolint:staticcheck // barrier
	ecancel()
	<-electDone
	c.desiredQ.ShutDown()
	wg.Wait()
	return nil
}

// ErrNoCRD: the IPPool CustomResourceDefinition is not installed.
var ErrNoCRD = errors.New("the IPPool CRD (ippools.edgelb.io) is not installed: apply lb/k8s/crds/edgelb.io_ippools.yaml")

func (c *Controller) checkCRD() error {
	rl, err := c.cs.Discovery().ServerResourcesForGroupVersion(IPPoolGVR.GroupVersion().String())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("discover %s: %w", IPPoolGVR.GroupVersion(), err)
	}
	if rl != nil {
		for _, r := range rl.APIResources {
			if r.Name == IPPoolGVR.Resource {
				return nil
			}
		}
	}
	return ErrNoCRD
}

// lead is one leadership term. It ends when the Lease is lost (lctx) or
// the controller stops (runCtx).
func (c *Controller) lead(runCtx, lctx context.Context) {
	c.leadMu.Lock()
	defer c.leadMu.Unlock()
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
		warned:  map[string]string{},
		changed: c.changed,
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

	c.mu.Lock()
	c.term = t
	c.mu.Unlock()
	c.changed()
	c.m.leader.Set(1)
	defer func() {
		c.mu.Lock()
		c.term = nil
		c.mu.Unlock()
		c.changed()
		c.kickDesired() // from Service status again, as a follower
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
// lag writes of the previous leader).
func (c *Controller) adopt(ctx context.Context, t *term) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
		in, _ := parseIntent(svc) // a bad annotation must not free an address in use
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
	return computePools(objs)
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

func (c *Controller) desiredWorker() {
	for {
		key, quit := c.desiredQ.Get()
		if quit {
			return
		}
		t0 := time.Now()
		d := c.buildDesired()
		c.publish(d)
		c.m.syncSeconds.WithLabelValues("desired").Observe(time.Since(t0).Seconds())
		c.desiredQ.Forget(key)
		c.desiredQ.Done(key)
	}
}

// publish hands d to every subscriber, replacing what they did not read.
func (c *Controller) publish(d lb.Desired) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.built = d, true
	for _, ch := range c.subs {
		select {
		case <-ch: // drop the stale value
		default:
		}
		ch <- d // cannot block: this is the only sender and the buffer is empty
	}
}

// Desired returns the latest desired state (zero before the caches synced).
func (c *Controller) Desired() lb.Desired {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
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
			if in, err := parseIntent(svc); err == nil && len(in.Requested) > 0 {
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
