// Package k8s is edgelb's Kubernetes mode: LoadBalancer IPs from IPPool
// objects, written to Service status by the one Lease holder, and the
// dataplane's desired state (VIPs, node ports, backends from EndpointSlices)
// computed on every gateway. See README.md.
package k8s

import (
	"context"
	"errors"
	"fmt"
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

	desiredQ workqueue.TypedRateLimitingInterface[string]
	synced   chan struct{}
	memo     map[string]memoEntry // desired worker only
	memoFP   string
	// announceWarned: pool → the announce finding last reported (desired
	// worker only; poolannounce.go).
	announceWarned map[string]string

	// The keeper goroutine owns the mutable state (keeper.go): inbox takes
	// its operations, snap is what readers see, kstop/kdone end it.
	inbox     ops
	snap      atomic.Pointer[snapshot]
	kstop     chan struct{}
	kstopOnce sync.Once
	kdone     chan struct{}

	// own: the gateway's own addresses (own.go); ownPassed: the pools
	// (name → UID and ranges) that passed the own-address check.
	own       atomic.Pointer[lb.OwnAddrs]
	ownMu     sync.Mutex
	ownPassed map[string]string

	// version moves after every change the Manager's lists can show
	// (Services, IPPools, pending reasons, leadership), so the web UI polls
	// for nothing while it holds (as lb/engine's Version).
	version atomic.Uint64
}

// changed bumps the version; called after the change is visible to readers.
func (c *Controller) changed() { c.version.Add(1) }

const (
	keyPools  = "pools"  // revalidate IPPools and hand them to the allocator
	keyStatus = "status" // write IPPool status (size, used, Valid)
	keyAll    = "all"    // the one desired-state key
	sliceIdx  = "service"
)

// Client rate limits when the rest.Config sets none: client-go's own
// default, 5 requests a second with bursts of 10, shared by every status
// write, event and Lease renewal, took 80 s to write the statuses of 200 new
// Services (TestK8sStatusBurst). kube-controller-manager's defaults are
// 20/30; edgelb is the one writer of many statuses, and the API server's
// priority and fairness still protects itself.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// NewForConfig builds a Controller from a rest.Config, rate limited at
// DefaultQPS/DefaultBurst unless cfg sets a limit or a limiter.
func NewForConfig(cfg *rest.Config, opts Options) (*Controller, error) {
	main := rest.CopyConfig(cfg)
	if main.QPS == 0 && main.RateLimiter == nil {
		main.QPS, main.Burst = DefaultQPS, DefaultBurst
	}
	cs, err := kubernetes.NewForConfig(main)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(main)
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
		newAlloc: func() Allocator {
			a := lb.NewAllocator()
			a.SetOrder(opts.AllocationOrder)
			return a
		},
		synced: make(chan struct{}), ownPassed: map[string]string{},
		desiredQ: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgelb-desired"}),
	}
	if opts.NewAllocator != nil {
		c.newAlloc = opts.NewAllocator
	}
	c.own.Store(opts.OwnAddrs)
	c.startKeeper()
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
		if t := c.view().term; t != nil {
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
	if t := c.view().term; t != nil {
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
	// Posted, not waited for: the keeper delivers the current state (if
	// any) and every later one; a call before Run is applied at once too.
	c.inbox.post(op{f: func(k *keeper) {
		if k.built {
			ch <- k.last
		}
		k.subs = append(k.subs, ch)
	}})
	return ch
}

// IsLeader reports whether this instance currently assigns addresses.
func (c *Controller) IsLeader() bool { return c.view().term != nil }

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
	defer c.stopKeeper() // last: the deferred steps below may still use it
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
	releases := c.watchReleases(ectx)
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
			// a next term waits for it to finish), then campaign again; a
			// waiting elector is replaced when the Lease is released
			// (handover.go), so the next attempt is now, not at its retry.
			c.campaign(ectx, le, releases)
		}
	}()

	<-ctx.Done()
	// Stop leading first (workers finish their writes), then release the Lease.
	var last chan struct{}
	c.do(func(k *keeper) { last = k.termDone })
	if last != nil {
		<-last
	}
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

func (c *Controller) desiredWorker() {
	for {
		key, quit := c.desiredQ.Get()
		if quit {
			return
		}
		t0 := time.Now()
		d := c.buildDesired()
		c.publish(d)
		c.checkPoolAnnounce(c.currentPools().Served())
		c.m.syncSeconds.WithLabelValues("desired").Observe(time.Since(t0).Seconds())
		c.desiredQ.Forget(key)
		c.desiredQ.Done(key)
	}
}

// publish hands d to every subscriber, replacing what they did not read.
func (c *Controller) publish(d lb.Desired) {
	c.do(func(k *keeper) {
		k.last, k.built, k.dirty = d, true, true
		for _, ch := range k.subs {
			select {
			case <-ch: // drop the stale value
			default:
			}
			ch <- d // cannot block: the keeper is the only sender and the buffer is empty
		}
	})
}

// Desired returns the latest desired state (zero before the caches synced).
func (c *Controller) Desired() lb.Desired { return c.view().last }
