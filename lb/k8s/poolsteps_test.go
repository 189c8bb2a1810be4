package k8s

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/retry"

	dpfake "github.com/edgelb/edgelb/proxy/fake"
)

// pool states a step expects (read from the IPPool object).
const (
	poolValid    = "valid"    // status Valid=True
	poolRejected = "rejected" // status Valid=False InvalidPool (overlap)
	poolDeleting = "deleting" // deletionTimestamp, finalizer kept, Valid=False DeletingInUse
	poolGone     = "gone"     // NotFound
)

// TestPoolChangeSteps (issue 13) is the decision logic of cluster-mode pool
// changes on client-go's fakes, one row per kubectl action: the sequence
// that once wrote one IP to four Services (pool default in use deleted
// while an overlapping pool waits), a shrink, an overlap-replace, a delete
// with nowhere to move, a re-create. The fake apiserver has no finalizer
// machinery and no optimistic concurrency: fakePoolAPI adds both.
// After every row: 0 duplicate addresses in Service status (sampled while
// the row converges, too), every sample of the leader's desired state
// accepted by a dataplane refusing duplicate frontends as nftables does,
// requested addresses kept, and exactly the expected number of moves.
func TestPoolChangeSteps(t *testing.T) {
	// The requesters come last by name and exist before the leader starts:
	// they must still get their address (requests are reserved first).
	var objs []runtime.Object
	for i := 0; i < 10; i++ {
		objs = append(objs, lbService(fmt.Sprintf("a%02d", i)))
	}
	objs = append(objs,
		lbService("zz-req-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.0" }),
		lbService("zz-req-annot", func(s *corev1.Service) { s.Annotations[AnnotationIPs] = "10.0.0.1" }))
	requests := map[string]string{"zz-req-spec": "10.0.0.0", "zz-req-annot": "10.0.0.1"}
	cs := fake.NewClientset(objs...)
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "edgelb.io/v1alpha1", APIResources: []metav1.APIResource{{Name: "ippools", Kind: "IPPool"}}}}
	dyn := fakePoolAPI(poolObj("default", 0, "10.0.0.0/28"))
	c, err := New(cs, dyn, Options{NodeName: "gw1", HandleClassless: true, LeaseDuration: time.Second, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	gvr := dyn.Resource(IPPoolGVR)
	svcs := cs.CoreV1().Services("default")
	total := len(objs)
	addServices := func(k int) {
		for i := 0; i < k; i++ {
			if _, err := svcs.Create(ctx, lbService(fmt.Sprintf("b%02d", total)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			total++
		}
	}
	createPool := func(name string, age time.Duration, addrs ...string) {
		if _, err := gvr.Create(ctx, poolObj(name, age, addrs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// deletePool is kubectl delete: the object stays, deleting, while a
	// finalizer holds it (fakePoolAPI plays the API server's part).
	deletePool := func(name string) {
		if err := gvr.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poolState := func(name string) string {
		u, err := gvr.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return poolGone
		}
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var status, reason string
		if len(conds) > 0 {
			if m, ok := conds[0].(map[string]any); ok {
				status, reason = fmt.Sprint(m["status"]), fmt.Sprint(m["reason"])
			}
		}
		switch {
		case u.GetDeletionTimestamp() != nil && reason == ReasonDeleting:
			return poolDeleting
		case status == "False" && reason == ReasonBadPool:
			return poolRejected
		case status == "True":
			return poolValid
		}
		return "unsettled"
	}
	// setAddrs replaces an IPPool's spec.addresses (kubectl edit, which
	// starts over from a fresh copy on a conflict).
	setAddrs := func(name string, addrs ...string) {
		a := make([]any, len(addrs))
		for i, s := range addrs {
			a[i] = s
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := gvr.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := unstructured.SetNestedSlice(u.Object, a, "spec", "addresses"); err != nil {
				return err
			}
			_, err = gvr.Update(ctx, u, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	dp := dpfake.New(dpfake.NFTablesOptions)
	var samples, dupsSeen, applyOK, applyFail int
	// sample reads Service status: name → address, duplicates counted as
	// two Services without one sharing key holding one address.
	sample := func() map[string]string {
		list, err := svcs.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addrs := map[string]string{}
		holders := map[string][]string{}
		for _, s := range list.Items {
			for _, in := range s.Status.LoadBalancer.Ingress {
				addrs[s.Name] = in.IP
				holders[in.IP] = append(holders[in.IP], s.Name)
			}
		}
		for ip, hs := range holders {
			if len(hs) > 1 {
				dupsSeen += len(hs) - 1
				t.Errorf("address %s in the status of %v", ip, hs)
			}
		}
		if err := dp.Apply(context.Background(), c.Desired().Dataplane); err != nil {
			applyFail++
			t.Errorf("the dataplane refused the leader's desired state: %v", err)
		} else {
			applyOK++
		}
		samples++
		return addrs
	}
	events := func(typ, reason, text string) int {
		evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs.Items {
			if e.Type == typ && e.Reason == reason && strings.Contains(e.Message, text) {
				n++
			}
		}
		return n
	}
	warnings := func(reason string) int { return events(corev1.EventTypeWarning, reason, "") }

	steps := []struct {
		name   string
		do     func()
		inside []string          // every Service's address lies in one of these
		pools  map[string]string // pool → expected state
		moved  int               // Services whose address changed in this row (new ones not counted)
		add    int               // Services created right after the change (they allocate from the new pools)
	}{
		{name: "12 Services on default (2 requests named last)", do: func() {},
			inside: []string{"10.0.0.0/28"}, pools: map[string]string{"default": poolValid}},
		{name: "overlapping wide created: waits", do: func() { createPool("wide", time.Second, "10.0.0.0/27") },
			inside: []string{"10.0.0.0/28"}, pools: map[string]string{"default": poolValid, "wide": poolRejected}},
		{name: "default (in use) deleted, wide takes over", do: func() { deletePool("default") }, add: 8,
			inside: []string{"10.0.0.0/27"}, pools: map[string]string{"default": poolGone, "wide": poolValid}},
		// 20 Services on .0–.31 (the 8 new ones on .12–.19); shrinking to
		// .0–.15 plus .64/28 moves exactly the 4 on .16–.19.
		{name: "wide shrunk to .0/28 + .64/28", moved: 4, do: func() { setAddrs("wide", "10.0.0.0/28", "10.0.0.64/28") },
			inside: []string{"10.0.0.0/28", "10.0.0.64/28"}, pools: map[string]string{"wide": poolValid}},
		// repl covers .0/26 only: the 4 on .64/28 move, wide stays
		// (deleting) until they have.
		{name: "overlap-replace: repl .0/26 waits, wide deleted", moved: 4, do: func() {
			createPool("repl", 2*time.Second, "10.0.0.0/26")
			deletePool("wide")
		}, add: 2, inside: []string{"10.0.0.0/26"}, pools: map[string]string{"wide": poolGone, "repl": poolValid}},
		{name: "repl (in use) deleted, nowhere to move", do: func() { deletePool("repl") },
			inside: []string{"10.0.0.0/26"}, pools: map[string]string{"repl": poolDeleting}},
		{name: "default re-created over them", do: func() { createPool("default", 3*time.Second, "10.0.0.0/24") }, add: 2,
			inside: []string{"10.0.0.0/24"}, pools: map[string]string{"repl": poolGone, "default": poolValid}},
	}
	var before map[string]string
	for _, st := range steps {
		st.do()
		addServices(st.add)
		var after map[string]string
		why := ""
		settled := func() bool {
			after = sample()
			if len(after) != total {
				why = fmt.Sprintf("%d of %d Services with an address", len(after), total)
				return false
			}
			for name, ip := range after {
				if !inAny(ip, st.inside) {
					why = fmt.Sprintf("%s holds %s, outside %v", name, ip, st.inside)
					return false
				}
			}
			for p, want := range st.pools {
				if got := poolState(p); got != want {
					why = fmt.Sprintf("IPPool %s is %s, want %s", p, got, want)
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(20 * time.Second); !settled(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not settled after 20 s: %s", st.name, why)
			}
		}
		moved := 0
		for name, ip := range before {
			if after[name] != ip {
				moved++
			}
		}
		for name, ip := range requests {
			if after[name] != ip {
				t.Errorf("%s: %s requested %s, holds %s", st.name, name, ip, after[name])
			}
		}
		t.Logf("step %-50s services with IP %2d/%d, duplicates %d, pending %d, moved %d, dataplane applies ok %d failed %d (%d samples)",
			st.name, len(after), total, dupsSeen, total-len(after), moved, applyOK, applyFail, samples)
		if moved != st.moved || dupsSeen != 0 || applyFail != 0 {
			t.Fatalf("%s: moved %d (want %d), duplicates %d, dataplane refusals %d", st.name, moved, st.moved, dupsSeen, applyFail)
		}
		if st.name == "repl (in use) deleted, nowhere to move" {
			u, _ := gvr.Get(ctx, "repl", metav1.GetOptions{})
			used, _, _ := unstructured.NestedInt64(u.Object, "status", "used")
			if used != int64(total) {
				t.Errorf("deleting repl reports used %d, want %d", used, total)
			}
			waitFor(t, 30*time.Second, "a DeletingInUse Warning", func() bool { return warnings(ReasonDeleting) > 0 })
			// Reserved is still served: the pool object exists until they move.
			if n := len(c.Desired().VIPs); n != total {
				t.Errorf("while repl is deleting the desired state has %d VIPs, want %d", n, total)
			}
		}
		before, samples, applyOK, applyFail = after, 0, 0, 0
	}
	// A move is done, not a failure (issue 37): a Normal IPMoved Event.
	if n := events(corev1.EventTypeNormal, ReasonMoved, "moved from"); n == 0 {
		t.Error("no Normal IPMoved Event for the moves")
	}
	if n := events(corev1.EventTypeWarning, ReasonFailed, "moved from"); n != 0 {
		t.Errorf("%d Warning AllocationFailed Events report a successful move", n)
	}
}

func inAny(ip string, prefixes []string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range prefixes {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}
	return false
}
