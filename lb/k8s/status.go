package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Event reasons of the status effect.
const (
	ReasonStatusFailed  = "StatusWriteFailed"
	ReasonStatusWritten = "StatusWritten"
)

// Service status is an effect of the leader's decision, not a precondition
// of programming it: reconcileService records what a Service holds in
// t.decided (the leader's own Desired is built from it at once) and queues
// the status write here. A write that fails is retried with backoff capped at
// statusRetryMax, reported on that Service with a Warning Event, and never
// withdraws the VIP or frees the address (the allocator keeps it held by the
// Service); other Services' writes go on (each key is its own work item).
// Followers learn the decision from the API server, as before.
const statusRetryMax = 5 * time.Second

func newStatusQueue() workqueue.TypedRateLimitingInterface[string] {
	// Per-Service backoff only (no shared token bucket): one Service whose
	// writes keep failing must not slow the writes of others.
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, statusRetryMax)
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgelb-status"})
}

// decide records the leader's decision for key and hands it to the dataplane
// (a rebuild now, not after the status write has come back through the API
// server) and to the status writer.
func (c *Controller) decide(t *term, key string, ips []netip.Addr) {
	var prev []netip.Addr
	var had bool
	c.do(func(k *keeper) {
		prev, had = t.decided[key]
		t.decided[key] = slices.Clone(ips)
		delete(t.stripped, key)
		delete(k.inherited, key) // this term's decision replaces the last term's
	})
	if !had || !slices.Equal(prev, ips) {
		// Add, not kickDesired's batch: the decision is the leader's own,
		// one per reconcile, and the queue coalesces what arrives while a
		// rebuild runs.
		c.desiredQ.Add(keyAll)
	}
	t.statusQ.Add(key)
}

// decidedVIPs snapshots, for buildDesired, the decisions this gateway
// serves: the current term's, else the last term's that the cache has not
// caught up with (stepDown; those whose Service moved on are forgotten
// here). nil when there are none.
func (c *Controller) decidedVIPs() map[string][]netip.Addr {
	var out map[string][]netip.Addr
	c.do(func(k *keeper) {
		for key, d := range k.inherited {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			if svc, err := c.services.Services(ns).Get(name); err != nil || svc.ResourceVersion != d.rv {
				delete(k.inherited, key)
				continue
			}
			if out == nil {
				out = make(map[string][]netip.Addr, len(k.inherited))
			}
			out[key] = d.ips
		}
		if k.term == nil {
			return
		}
		if out == nil {
			out = make(map[string][]netip.Addr, len(k.term.decided))
		}
		for key, v := range k.term.decided {
			out[key] = v // never mutated in place: decide stores a fresh clone
		}
	})
	return out
}

// inheritedDecision is one decision of an ended term and the
// resourceVersion its Service had in the cache when the term ended.
type inheritedDecision struct {
	ips []netip.Addr
	rv  string
}

// stepDown keeps an ending term's decisions (k is the keeper's state, held).
// A leader serves its own decisions, whose status writes may not have come
// back through the informer yet; if it steps down because the API server is
// gone, no event will bring them, and serving from the cached status alone
// would withdraw the VIPs of the last Services it assigned — for as long as
// the API server is away (TestK8sAPIServerDown caught one in a soak run). So
// a decision stays in force while the cached Service is the very version
// it was at step-down: any newer version (the status coming back, a new
// leader's write, an edit) says more than the old decision, and from then on
// the Service is served from its status as on any follower.
func (c *Controller) stepDown(k *keeper, t *term) {
	k.inherited = make(map[string]inheritedDecision, len(t.decided))
	for key, ips := range t.decided {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		svc, err := c.services.Services(ns).Get(name)
		if err != nil {
			continue // gone from the cache: nothing to serve
		}
		k.inherited[key] = inheritedDecision{ips: ips, rv: svc.ResourceVersion}
	}
}

func (c *Controller) statusWorker(t *term) {
	for {
		key, quit := t.statusQ.Get()
		if quit {
			return
		}
		err := c.syncStatus(t, key)
		if err != nil && t.ctx.Err() == nil {
			c.opts.Logger.Debug("status write failed; retrying", "service", key, "err", err)
			t.statusQ.AddRateLimited(key)
		} else {
			t.statusQ.Forget(key)
		}
		t.statusQ.Done(key)
	}
}

// syncStatus writes key's status.loadBalancer.ingress to the leader's
// decision (or strips the addresses of a Service no longer ours).
func (c *Controller) syncStatus(t *term, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var ips, strip []netip.Addr
	var dec, str bool
	var pending string
	var invalid bool
	c.do(func(*keeper) {
		ips, dec = t.decided[key]
		strip, str = t.stripped[key]
		pending, invalid = t.pending[key], t.invalid[key]
	})
	var want []netip.Addr
	var cond *metav1.Condition
	switch {
	case dec && c.opts.ours(svc):
		want = ips
		cond = addressCondition(svc, ips, pending, invalid)
	case pending != "" && c.opts.ours(svc):
		// Not decided: a request edgelb cannot read yet (a typo in an
		// annotation). The addresses stay as they are; the condition says why.
		want = ingressIPs(svc)
		cond = addressCondition(svc, want, pending, invalid)
	case str:
		for _, ip := range ingressIPs(svc) {
			if !containsAddr(strip, ip) {
				want = append(want, ip)
			}
		}
	default:
		return nil // not decided (yet), or no longer ours: reconcile queues it
	}
	if err := c.writeIngress(t.ctx, svc, want, cond); err != nil {
		if !apierrors.IsConflict(err) && t.ctx.Err() == nil {
			// A conflict only means our cached copy is stale: the informer
			// brings the new one and the retry succeeds; anything else is
			// the Service owner's to know.
			c.warn(t, svc, "status/"+key, ReasonStatusFailed, fmt.Sprintf(
				"cannot write status.loadBalancer.ingress %v: %v; the address stays held by this Service and the leader keeps serving it; retrying",
				want, err))
		}
		return err
	}
	var failed bool
	c.do(func(*keeper) {
		if str && slices.Equal(t.stripped[key], strip) {
			delete(t.stripped, key)
		}
		_, failed = t.warned["status/"+key]
		delete(t.warned, "status/"+key)
	})
	if failed {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonStatusWritten, "status.loadBalancer.ingress written: %v", want)
	}
	return nil
}

// writeIngress writes ips as status.loadBalancer.ingress and cond (nil:
// none; a Service no longer ours keeps its last one) as a status condition,
// when either differs from what the Service shows.
func (c *Controller) writeIngress(ctx context.Context, svc *corev1.Service, ips []netip.Addr, cond *metav1.Condition) error {
	cur := ingressIPs(svc)
	sameIPs := len(cur) == len(ips) && len(svc.Status.LoadBalancer.Ingress) == len(ips)
	for i := 0; sameIPs && i < len(ips); i++ {
		sameIPs = cur[i] == ips[i]
	}
	if sameIPs && sameCondition(svc.Status.Conditions, cond) {
		return nil
	}
	cp := svc.DeepCopy()
	if !sameIPs {
		cp.Status.LoadBalancer.Ingress = nil
		vip := corev1.LoadBalancerIPModeVIP
		for _, ip := range ips {
			cp.Status.LoadBalancer.Ingress = append(cp.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: &vip})
		}
	}
	if cond != nil {
		meta.SetStatusCondition(&cp.Status.Conditions, *cond)
	}
	_, err := c.cs.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{FieldManager: "edgelb"})
	if err != nil {
		return fmt.Errorf("update status of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// ConditionAddress is the Service status condition edgelb keeps
// (status.conditions, which Kubernetes offers for this since 1.20): True
// when every family the Service asks for has its address, False while one
// is pending (Pending: none free; InvalidRequest: an annotation or spec
// edgelb cannot read — the addresses held stay). kubectl wait --for=condition=edgelb.io/AddressAssigned
// waits for it.
const ConditionAddress = "edgelb.io/AddressAssigned"

// Condition reasons.
const (
	ReasonCondAssigned = "Assigned"
	ReasonCondPending  = "Pending"
	ReasonCondInvalid  = "InvalidRequest"
)

func addressCondition(svc *corev1.Service, ips []netip.Addr, pending string, invalid bool) *metav1.Condition {
	c := &metav1.Condition{Type: ConditionAddress, ObservedGeneration: svc.Generation}
	if pending != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonCondPending, pending
		if invalid {
			c.Reason = ReasonCondInvalid
		}
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, ReasonCondAssigned
	c.Message = fmt.Sprintf("assigned %v", ips)
	return c
}

// sameCondition: cond is nil or already shown (the transition time aside).
func sameCondition(have []metav1.Condition, cond *metav1.Condition) bool {
	if cond == nil {
		return true
	}
	h := meta.FindStatusCondition(have, cond.Type)
	return h != nil && h.Status == cond.Status && h.Reason == cond.Reason && h.Message == cond.Message && h.ObservedGeneration == cond.ObservedGeneration
}
