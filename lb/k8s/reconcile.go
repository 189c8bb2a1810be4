package k8s

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/edgelb/edgelb/lb"
)

// Event reasons on Services and IPPools.
const (
	ReasonAllocated = "IPAllocated"
	ReasonReleased  = "IPReleased"
	ReasonFailed    = "AllocationFailed"
	// ReasonMoved: a Service's address moved make-before-break (its pool
	// went or shrank, or no longer admits it) — done, so a Normal Event.
	ReasonMoved    = "IPMoved"
	ReasonBadPool  = "InvalidPool"
	ReasonDeleting = "DeletingInUse"
)

// intentKey summarises an intent so a change of request is detectable.
type intentKey string

func keyOfIntent(in intent) intentKey {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%v|%s|%s|", in.Families, in.RequireAll, in.Req.Pool, in.Req.SharingKey)
	for _, f := range []lb.Family{lb.IPv4, lb.IPv6} {
		if a, ok := in.Requested[f]; ok {
			b.WriteString(a.String() + ",")
		}
	}
	for _, p := range in.Req.Ports {
		fmt.Fprintf(&b, "|%d/%d", p.Port, p.Protocol)
	}
	return intentKey(b.String())
}

// sortServices orders oldest first (then by key): when two Services claim
// one address, the older keeps it.
func sortServices(svcs []corev1.Service) {
	sort.Slice(svcs, func(i, j int) bool {
		ti, tj := svcs[i].CreationTimestamp, svcs[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})
}

func hasFam(ips []netip.Addr, f lb.Family) bool {
	for _, a := range ips {
		if familyOf(a) == f {
			return true
		}
	}
	return false
}

// reconcileService brings one Service's addresses and status to what it
// asks for. The allocator is the truth for what a Service holds; the
// informer cache may lag our own writes.
func (c *Controller) reconcileService(t *term, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		var held []netip.Addr
		c.do(func(*keeper) { held = t.alloc.IPs(key) })
		if len(held) == 0 {
			c.forget(t, key)
			return nil
		}
		// Never free an address on the word of a cache that may lag: ask.
		svc, err = c.cs.CoreV1().Services(ns).Get(t.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.do(func(*keeper) { t.alloc.ReleaseAll(key) })
			c.auditService(nil, key, held, nil)
			c.forget(t, key)
			c.m.allocations.WithLabelValues("released").Add(float64(len(held)))
			c.kickPending(t, key)
			// Pool status, metric and the in-use finalizer follow every
			// release (issue 37: USED stayed 301 after 300 deletions, and a
			// deleted pool stayed until some other allocation happened).
			t.poolQ.AddAfter(keyStatus, poolStatusDelay)
			return nil
		}
	}
	if err != nil {
		return err
	}
	if !c.opts.ours(svc) {
		return c.dropService(t, svc, key)
	}
	in, perr := parseIntent(svc, c.ownAddrs())
	in.Req.NamespaceLabels = c.namespaceLabels(ns)
	if perr != nil {
		// Keep whatever it holds: a typo must not cost a working address.
		c.do(func(k *keeper) {
			t.pending[key] = perr.Error()
			t.invalid[key] = true
			c.m.pending.Set(float64(len(t.pending)))
			k.dirty, k.bump = true, true
		})
		c.warn(t, svc, key, ReasonFailed, perr.Error())
		t.statusQ.Add(key) // the condition says why
		return nil
	}

	// The allocation, on the keeper: no I/O in here (Events and queueing
	// follow, on this worker).
	var start, after, added []netip.Addr
	var notes, moves, failures []string
	var pools []lb.Pool
	released := false
	ik := keyOfIntent(in)
	c.do(func(k *keeper) {
		held := t.alloc.IPs(key)
		start = held
		if len(held) == 0 && !c.noAdopt {
			// Adopt what the status says (a Service the adoption pass did not
			// see, e.g. created just before this term).
			for _, ip := range ingressIPs(svc) {
				if err := t.alloc.Adopt(key, ip, in.Req); err != nil {
					notes = append(notes, fmt.Sprintf("cannot keep %s from status: %v", ip, err))
				}
			}
			start = t.alloc.IPs(key) // adopted, not newly assigned: no event
		} else {
			// An address whose pool is gone (IPPool deleted or shrunk) moves —
			// make before break: the Service keeps it, reserved (the allocator
			// hands it to nobody else), until a new address is found; only then
			// is the old one released (Allocate drops it). One Service at a
			// time: each is its own work item.
			for _, ip := range held {
				if _, ok := t.alloc.PoolOf(ip); ok {
					continue
				}
				f := familyOf(ip)
				if r, ok := in.Requested[f]; ok && r == ip {
					notes = append(notes, fmt.Sprintf("keeps requested %s, which is no longer in any IPPool, until it is released or an IPPool covers it again", ip))
					continue
				}
				if nip, err := t.alloc.Allocate(key, f, in.Req); err == nil {
					moves = append(moves, fmt.Sprintf("moved from %s to %s: %s is no longer in any IPPool", ip, nip, ip))
					released = true
				} else {
					notes = append(notes, fmt.Sprintf("keeps %s, which is no longer in any IPPool, until another address is free: %v", ip, err))
				}
			}
		}
		if c.moveNotAdmitted(t, key, in, &notes, &moves) {
			released = true
		}
		held = t.alloc.IPs(key)
		if prev, ok := t.reqs[key]; len(held) > 0 && (!ok || prev != ik) {
			// The request changed: keep each address only if it still fits.
			for _, ip := range held {
				f := familyOf(ip)
				want := hasFamily(in.Families, f)
				if r, ok := in.Requested[f]; ok && r != ip {
					want = false
				}
				if want {
					if err := t.alloc.Assign(key, ip, in.Req); err != nil {
						notes = append(notes, fmt.Sprintf("releasing %s: %v", ip, err))
						want = false
					}
				}
				if !want {
					t.alloc.Release(key, ip)
					released = true
				}
			}
		}
		t.reqs[key] = ik
		before := t.alloc.IPs(key)
		for _, f := range in.Families {
			if hasFam(before, f) {
				continue
			}
			var err error
			if r, ok := in.Requested[f]; ok {
				err = t.alloc.Assign(key, r, in.Req)
			} else {
				_, err = t.alloc.Allocate(key, f, in.Req)
			}
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", f, err))
			}
		}
		after = t.alloc.IPs(key)
		delete(t.invalid, key)
		was, wasPending := t.pending[key]
		if len(failures) > 0 {
			// Kept in the pending set even when partly served (PreferDualStack):
			// it is retried as soon as any address frees.
			t.pending[key] = strings.Join(failures, "; ")
			c.m.allocations.WithLabelValues("failed").Add(float64(len(failures)))
		} else {
			delete(t.pending, key)
		}
		c.m.pending.Set(float64(len(t.pending)))
		added = diffAddrs(after, start)
		pools = t.pools.Valid
		now, isPending := t.pending[key]
		// A new snapshot only when the pending reasons changed (it copies
		// them); the version moves after every reconcile, as before.
		k.dirty = k.dirty || was != now || wasPending != isPending
		k.bump = true
	})

	if released {
		c.kickPending(t, key)
	}
	c.auditService(svc, key, start, after)
	for _, ip := range added {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonAllocated, "Assigned IP %s from pool %q", ip, poolOf(pools, ip))
		c.m.allocations.WithLabelValues("assigned").Inc()
	}
	for _, ip := range diffAddrs(start, after) {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonReleased, "Released IP %s", ip)
	}
	if len(moves) > 0 {
		c.recorder.Event(svc, corev1.EventTypeNormal, ReasonMoved, strings.Join(moves, "; "))
	}
	if len(notes) > 0 || len(failures) > 0 {
		c.warn(t, svc, key, ReasonFailed, strings.Join(append(notes, failures...), "; "))
	} else {
		c.clearWarn(t, key)
	}
	if len(added) > 0 || released {
		t.poolQ.AddAfter(keyStatus, poolStatusDelay)
	}
	c.decide(t, key, after)
	return nil
}

// dropService releases a Service that is no longer ours (type or class
// changed) and removes our addresses from its status.
func (c *Controller) dropService(t *term, svc *corev1.Service, key string) error {
	var held []netip.Addr
	c.do(func(*keeper) {
		held = t.alloc.IPs(key)
		t.alloc.ReleaseAll(key)
	})
	c.forget(t, key)
	if len(held) == 0 {
		return nil
	}
	c.auditService(svc, key, held, nil)
	c.m.allocations.WithLabelValues("released").Add(float64(len(held)))
	c.kickPending(t, key)
	t.poolQ.AddAfter(keyStatus, poolStatusDelay)
	c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonReleased, "Released %v: the Service is no longer a LoadBalancer of class %q", held, c.opts.Class)
	c.do(func(*keeper) { t.stripped[key] = held })
	t.statusQ.Add(key)
	return nil
}

// forget drops what the term knows of key (a Service gone or not ours).
func (c *Controller) forget(t *term, key string) {
	c.do(func(k *keeper) {
		delete(t.decided, key)
		delete(t.stripped, key)
		delete(t.pending, key)
		delete(t.invalid, key)
		delete(t.reqs, key)
		delete(t.warned, key)
		delete(k.inherited, key) // this term's word on key is the last
		k.dirty, k.bump = true, true
	})
}

func (c *Controller) clearWarn(t *term, key string) {
	c.do(func(*keeper) { delete(t.warned, key) })
}

// kickPending re-queues every Service waiting for an address.
func (c *Controller) kickPending(t *term, except string) {
	var keys []string
	c.do(func(*keeper) {
		keys = make([]string, 0, len(t.pending))
		for k := range t.pending {
			if k != except {
				keys = append(keys, k)
			}
		}
	})
	for _, k := range keys {
		t.svcQ.Add(k)
	}
}

// warn sends a Warning Event unless the same message was the last one sent
// for this object in this term.
func (c *Controller) warn(t *term, obj runtime.Object, key, reason, msg string) {
	var same bool
	c.do(func(*keeper) {
		same = t.warned[key] == msg
		t.warned[key] = msg
	})
	if !same {
		c.recorder.Event(obj, corev1.EventTypeWarning, reason, msg)
	}
}

func diffAddrs(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if !containsAddr(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func containsAddr(s []netip.Addr, a netip.Addr) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}

func poolOf(pools []lb.Pool, ip netip.Addr) string {
	for i := range pools {
		if pools[i].Contains(ip) {
			return pools[i].Name
		}
	}
	return ""
}

// syncPools revalidates every IPPool; a bad one gets a Warning quoting
// the value and is not used, the others are unaffected.
func (c *Controller) syncPools(t *term) {
	ps := c.currentPools()
	var changed bool
	var orphans []lb.Orphan
	var err error
	var old []lb.Pool
	c.do(func(*keeper) {
		old = t.pools.Valid
		// t.pools and the allocator's pools change in one operation.
		changed = fmt.Sprint(poolsFingerprint(t.pools.Valid)) != fmt.Sprint(poolsFingerprint(ps.Valid))
		t.pools = ps
		if changed {
			orphans, err = t.alloc.ReplacePools(ps.Valid)
		}
	})
	if err != nil {
		c.opts.Logger.Error("set pools", "err", err)
	}
	if changed {
		c.auditPools(old, ps.Valid, func(name string) metav1.Object {
			if o, ok, _ := c.poolInf.GetStore().GetByKey(name); ok {
				if m, ok := o.(metav1.Object); ok {
					return m
				}
			}
			return nil
		})
	}
	for _, o := range orphans {
		c.opts.Logger.Info("address left its pool; moving the Service", "service", o.Service, "ip", o.IP, "pool", o.Pool)
	}
	for name, err := range ps.Rejected {
		if o, ok, _ := c.poolInf.GetStore().GetByKey(name); ok {
			c.warn(t, o.(runtime.Object), "ippool/"+name, ReasonBadPool, fmt.Sprintf("IPPool %q is not used: %v", name, err))
		}
	}
	for _, p := range ps.Valid {
		c.clearWarn(t, "ippool/"+p.Name)
	}
	if changed {
		for _, k := range c.svcInf.GetStore().ListKeys() {
			t.svcQ.Add(k)
		}
	}
	t.poolQ.Add(keyStatus)
}

func poolsFingerprint(ps []lb.Pool) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%s %v %v %v %+v %s", p.Name, p.RangeStrings(), p.AutoAssign, p.AvoidBuggyIPs, p.Advertisement, allocationString(p.Allocation))
	}
	return out
}

// writePoolStatus writes size, used and the Valid condition of each IPPool
// (only when they differ), keeps the in-use finalizer on pools whose
// addresses are held, and updates the pool metrics.
func (c *Controller) writePoolStatus(t *term) error {
	var ps poolSet
	used := map[string]int{}
	holders := map[string][]string{}
	c.do(func(*keeper) {
		ps = t.pools
		for _, p := range ps.Valid {
			used[p.Name] = t.alloc.Used(p.Name)
		}
		// A deleting pool's addresses still held by Services (in no valid pool:
		// one covered by another pool belongs to that one now).
		if len(ps.Deleting) > 0 {
			for _, svc := range t.alloc.Assigned() {
				for _, ip := range t.alloc.IPs(svc) {
					if _, ok := t.alloc.PoolOf(ip); ok {
						continue
					}
					for name, p := range ps.Deleting {
						if p.Contains(ip) {
							used[name]++
							holders[name] = append(holders[name], fmt.Sprintf("%s (%s)", svc, ip))
						}
					}
				}
			}
		}
	})
	var firstErr error
	objs := c.poolInf.GetStore().List()
	exist := make(map[string]bool, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			exist[u.GetName()] = true
		}
	}
	c.m.keepPools(exist)
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		name := u.GetName()
		if changed, err := c.syncFinalizer(t, u, used[name]); err != nil || changed {
			// The object's version moved: its status is written on the
			// next round, from the informer's fresh copy.
			if err != nil && firstErr == nil {
				firstErr = err
			}
			t.poolQ.AddAfter(keyStatus, 300*time.Millisecond)
			continue
		}
		var size int64
		cond := map[string]any{"type": "Valid", "status": "True", "reason": "Accepted", "message": ""}
		if err, bad := ps.Rejected[name]; bad {
			cond["status"], cond["reason"], cond["message"] = "False", ReasonBadPool, err.Error()
		}
		if _, del := ps.Deleting[name]; del {
			h := holders[name]
			sort.Strings(h)
			if len(h) > 5 {
				h = append(h[:5], fmt.Sprintf("and %d more", len(h)-5))
			}
			msg := fmt.Sprintf("deleted while %d address(es) are in use, kept reserved until their Services move (make before break) or are deleted: %s; "+
				"%s", used[name], strings.Join(h, ", "), recreateHint)
			cond["status"], cond["reason"], cond["message"] = "False", ReasonDeleting, msg
			c.warn(t, u, "ippool/"+name, ReasonDeleting, "IPPool deleted while Services hold its addresses: they stay reserved "+
				"until each Service has moved to another address or is deleted; the IPPool goes when the last has (its status lists them); "+recreateHint)
		}
		if p, err := poolFromObject(u, nil); err == nil {
			size = poolSize(&p)
		}
		c.m.setPool(name, size, used[name])
		curSize, _, _ := unstructured.NestedInt64(u.Object, "status", "size")
		curUsed, _, _ := unstructured.NestedInt64(u.Object, "status", "used")
		curConds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var cur map[string]any
		if len(curConds) > 0 {
			cur, _ = curConds[0].(map[string]any)
		}
		sameCond := cur != nil && cur["status"] == cond["status"] && fmt.Sprint(cur["message"]) == cond["message"]
		_, hasSize, _ := unstructured.NestedInt64(u.Object, "status", "size")
		if hasSize && curSize == size && curUsed == int64(used[name]) && sameCond {
			continue
		}
		if sameCond {
			cond["lastTransitionTime"] = cur["lastTransitionTime"]
		} else {
			cond["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
		}
		cp := u.DeepCopy()
		cp.Object["status"] = map[string]any{
			"size": size, "used": int64(used[name]), "observedGeneration": u.GetGeneration(),
			"conditions": []any{cond},
		}
		if _, err := c.dyn.Resource(IPPoolGVR).UpdateStatus(t.ctx, cp, metav1.UpdateOptions{FieldManager: "edgelb"}); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("update status of IPPool %s: %w", name, err)
		}
	}
	return firstErr
}

// recreateHint is the way out for a user who deleted a pool in use and
// wants it back: the API server refuses a create under the name of an
// object that is being deleted, but an IPPool under another name may cover
// the same addresses — they then count in it, the Services keep them
// without moving, and the deleting one goes at once (lb/k8s/README.md).
const recreateHint = "to keep these addresses, create an IPPool with another name covering them " +
	"(the Services keep their addresses and this IPPool goes at once); the name is free again once it has gone"

// syncFinalizer keeps FinalizerInUse on an IPPool exactly while Services
// hold its addresses: added when the first is assigned, removed when the
// last has moved — then a deleted pool goes. (With no leader running a
// deleted pool in use stays; `kubectl patch ippool NAME --type=merge -p
// '{"metadata":{"finalizers":null}}'` lets it go by hand.)
func (c *Controller) syncFinalizer(t *term, u *unstructured.Unstructured, used int) (bool, error) {
	fins := u.GetFinalizers()
	has := slices.Contains(fins, FinalizerInUse)
	switch {
	case used > 0 && !has && u.GetDeletionTimestamp() == nil:
		fins = append(slices.Clone(fins), FinalizerInUse)
	case used == 0 && has:
		fins = slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == FinalizerInUse })
	default:
		return false, nil
	}
	cp := u.DeepCopy()
	cp.SetFinalizers(fins)
	if _, err := c.dyn.Resource(IPPoolGVR).Update(t.ctx, cp, metav1.UpdateOptions{FieldManager: "edgelb"}); err != nil {
		return false, fmt.Errorf("finalizer of IPPool %s: %w", u.GetName(), err)
	}
	return true, nil
}

// poolStatusDelay batches the IPPool status write after allocations and
// releases: a burst of them (300 Services deleted) costs one write per
// pool, and the status is still exact well within a second of the last.
const poolStatusDelay = 300 * time.Millisecond

// moveNotAdmitted moves each address of key whose pool's serviceAllocation
// no longer admits the Service (its labels, its namespace's labels or the
// pool's selectors changed), as MetalLB does, but make before break: the
// old address is released only once Allocate has found a new one, and
// kept (with a note) while none is free. A requested address is kept with
// a note. Priority alone never moves an address. Runs on the keeper.
func (c *Controller) moveNotAdmitted(t *term, key string, in intent, notes, moves *[]string) (moved bool) {
	for _, ip := range t.alloc.IPs(key) {
		why := t.alloc.Admitted(key, ip, in.Req)
		if why == nil {
			continue
		}
		f := familyOf(ip)
		if r, ok := in.Requested[f]; ok && r == ip {
			*notes = append(*notes, fmt.Sprintf("keeps requested %s: %v", ip, why))
			continue
		}
		nip, err := t.alloc.Allocate(key, f, in.Req)
		switch {
		case errors.Is(err, lb.ErrNotAdmitted): // the annotated pool itself excludes it: nowhere to go
			*notes = append(*notes, fmt.Sprintf("keeps %s: %v", ip, why))
			continue
		case err != nil:
			*notes = append(*notes, fmt.Sprintf("keeps %s until an admitting pool has a free address (%v): %v", ip, why, err))
			continue
		}
		*moves = append(*moves, fmt.Sprintf("moved from %s to %s: %v", ip, nip, why))
		moved = true
	}
	return moved
}

// allocationString renders a serviceAllocation for the pools fingerprint
// (a pointer would print as an address; maps print sorted).
func allocationString(a *lb.ServiceAllocation) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%+v", *a)
}
