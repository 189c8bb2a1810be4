package k8s

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakePoolAPI is client-go's dynamic fake holding the IPPool resource and
// the given pools, made to obey the API server's rules for a custom
// resource with a status subresource, which the fake's tracker does not:
// it stores whatever an update carries, so a controller's status write
// made from a stale informer copy silently undid a test's delete
// (deletionTimestamp gone, the pool valid again), and TestPoolChangeSteps
// failed in CI on c62fefc and in 1 of 30, then 1 of 120 runs on a busy
// machine (0 of 300 with this fake). The rules, as
// kube-apiserver applies them:
//
//   - every write gets a new metadata.resourceVersion; an update carrying
//     another one than the stored object's is refused with 409 Conflict
//     (optimistic concurrency), one carrying none as invalid (a custom
//     resource allows no unconditional update);
//   - a create drops the status; an update of the object keeps the stored
//     status, creationTimestamp and deletionTimestamp and moves
//     metadata.generation when anything but metadata changed; an update
//     of /status changes the status only;
//   - a deleting object takes no new finalizers;
//   - a delete of an object with finalizers sets deletionTimestamp and
//     moves the generation (k8s.io/apiserver's registry store does, for
//     resources without graceful deletion: the controller's pool handler
//     skips updates that keep the generation); the object goes when an
//     update empties its finalizers.
func fakePoolAPI(pools ...runtime.Object) *dynamicfake.FakeDynamicClient {
	var version atomic.Int64
	next := func() string { return strconv.FormatInt(version.Add(1), 10) }
	stamped := make([]runtime.Object, len(pools))
	for i, o := range pools {
		u := o.(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(next())
		u.SetGeneration(1)
		stamped[i] = u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{IPPoolGVR: "IPPoolList"}, stamped...)
	tracker := dyn.Tracker()
	gr := IPPoolGVR.GroupResource()
	stored := func(name string) (*unstructured.Unstructured, error) {
		o, err := tracker.Get(IPPoolGVR, "", name)
		if err != nil {
			return nil, err
		}
		return o.(*unstructured.Unstructured).DeepCopy(), nil
	}
	// Reactors run under the fake's lock: each read-check-write is atomic,
	// as one request is on the API server.
	dyn.PrependReactor("create", "ippools", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(next())
		u.SetGeneration(1)
		delete(u.Object, "status") // a create does not write the status subresource
		if err := tracker.Create(IPPoolGVR, u, ""); err != nil {
			return true, nil, err
		}
		return true, u, nil
	})
	dyn.PrependReactor("update", "ippools", func(a k8stesting.Action) (bool, runtime.Object, error) {
		in := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		cur, err := stored(in.GetName())
		if err != nil {
			return true, nil, err
		}
		switch rv := in.GetResourceVersion(); {
		case rv == "":
			return true, nil, apierrors.NewInvalid(IPPoolGVK.GroupKind(), in.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata", "resourceVersion"), rv, "must be specified for an update")})
		case rv != cur.GetResourceVersion():
			return true, nil, apierrors.NewConflict(gr, in.GetName(), errStale{sent: rv, stored: cur.GetResourceVersion()})
		}
		if cur.GetDeletionTimestamp() != nil {
			for _, f := range in.GetFinalizers() {
				if !slices.Contains(cur.GetFinalizers(), f) {
					return true, nil, apierrors.NewInvalid(IPPoolGVK.GroupKind(), in.GetName(), field.ErrorList{
						field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
				}
			}
		}
		out := cur
		if a.GetSubresource() == "status" {
			setStatus(out, in)
		} else {
			out = in.DeepCopy()
			setStatus(out, cur)
			out.SetDeletionTimestamp(cur.GetDeletionTimestamp())
			out.SetCreationTimestamp(cur.GetCreationTimestamp())
			out.SetGeneration(cur.GetGeneration())
			if !equality.Semantic.DeepEqual(nonMetadata(out), nonMetadata(cur)) {
				out.SetGeneration(cur.GetGeneration() + 1)
			}
			if out.GetDeletionTimestamp() != nil && len(out.GetFinalizers()) == 0 {
				return true, out, tracker.Delete(IPPoolGVR, "", out.GetName())
			}
		}
		out.SetResourceVersion(next())
		return true, out, tracker.Update(IPPoolGVR, out, "")
	})
	dyn.PrependReactor("delete", "ippools", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cur, err := stored(a.(k8stesting.DeleteAction).GetName())
		if err != nil {
			return true, nil, err
		}
		if len(cur.GetFinalizers()) == 0 {
			return true, nil, tracker.Delete(IPPoolGVR, "", cur.GetName())
		}
		if cur.GetDeletionTimestamp() == nil {
			now := metav1.Now()
			cur.SetDeletionTimestamp(&now)
			cur.SetGeneration(cur.GetGeneration() + 1)
			cur.SetResourceVersion(next())
			return true, nil, tracker.Update(IPPoolGVR, cur, "")
		}
		return true, nil, nil
	})
	return dyn
}

// setStatus gives dst the status of src (none if src has none).
func setStatus(dst, src *unstructured.Unstructured) {
	if st, ok := src.Object["status"]; ok {
		dst.Object["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(dst.Object, "status")
	}
}

// nonMetadata is what moves a custom resource's generation when changed:
// everything but metadata (status is the stored one by then).
func nonMetadata(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// errStale is the message of a Conflict: the update was made from an old
// copy.
type errStale struct{ sent, stored string }

func (e errStale) Error() string {
	return "the object has been modified; please apply your changes to the latest version and try again (resourceVersion " +
		e.sent + ", stored " + e.stored + ")"
}

// checkPoolAPIRules shows on an IPPool resource the rules fakePoolAPI
// claims: run on the fake (TestFakePoolAPIRules, unit) and on a real
// kube-apiserver with the CRD (TestK8sPoolAPIRules), so the fake cannot
// drift from what it plays.
func checkPoolAPIRules(t *testing.T, ctx context.Context, ri dynamic.ResourceInterface) {
	t.Helper()
	get := func() *unstructured.Unstructured {
		t.Helper()
		u, err := ri.Get(ctx, "rules", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	used := func(u *unstructured.Unstructured) int64 {
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "used")
		return n
	}
	addrs := func(u *unstructured.Unstructured) string {
		a, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
		return strings.Join(a, ",")
	}
	setAddrs := func(u *unstructured.Unstructured, a string) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{a}, "spec", "addresses")
	}
	setUsed := func(u *unstructured.Unstructured, n int64) {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"size": int64(16), "used": n}, "status")
	}
	want := func(step string, ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf("%s: "+format, append([]any{step}, args...)...)
		}
	}

	in := poolObj("rules", 0, "198.51.100.0/28")
	setUsed(in, 7)
	created, err := ri.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := get()
	want("create", u.GetResourceVersion() != "" && u.GetGeneration() == 1 && u.Object["status"] == nil,
		"resourceVersion %q generation %d status %v, want one, 1, none", u.GetResourceVersion(), u.GetGeneration(), u.Object["status"])

	st := u.DeepCopy()
	setUsed(st, 3)
	setAddrs(st, "198.51.100.16/28")
	if _, err := ri.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u = get()
	want("update status", used(u) == 3 && addrs(u) == "198.51.100.0/28" && u.GetGeneration() == 1,
		"used %d addresses %s generation %d, want 3, the old ones, 1", used(u), addrs(u), u.GetGeneration())

	_, err = ri.Update(ctx, created, metav1.UpdateOptions{})
	want("update from a stale copy", apierrors.IsConflict(err), "%v, want a Conflict", err)
	blank := get()
	blank.SetResourceVersion("")
	_, err = ri.Update(ctx, blank, metav1.UpdateOptions{})
	want("update without resourceVersion", apierrors.IsInvalid(err), "%v, want Invalid", err)

	u = get()
	setAddrs(u, "198.51.100.32/28")
	setUsed(u, 9)
	if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u = get()
	want("update", addrs(u) == "198.51.100.32/28" && used(u) == 3 && u.GetGeneration() == 2,
		"addresses %s used %d generation %d, want the new ones, the stored 3, 2", addrs(u), used(u), u.GetGeneration())

	u.SetFinalizers([]string{FinalizerInUse})
	if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u = get()
	want("a finalizer added", u.GetGeneration() == 2, "generation %d, want 2 (metadata only)", u.GetGeneration())

	if err := ri.Delete(ctx, "rules", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u = get()
	want("delete with a finalizer", u.GetDeletionTimestamp() != nil && u.GetGeneration() == 3,
		"deletionTimestamp %v generation %d, want set, 3", u.GetDeletionTimestamp(), u.GetGeneration())

	more := u.DeepCopy()
	more.SetFinalizers([]string{FinalizerInUse, "example.com/more"})
	_, err = ri.Update(ctx, more, metav1.UpdateOptions{})
	want("a finalizer added while deleting", apierrors.IsInvalid(err), "%v, want Invalid", err)

	undelete := get()
	undelete.SetDeletionTimestamp(nil)
	undelete.SetAnnotations(map[string]string{"touched": "yes"})
	if _, err := ri.Update(ctx, undelete, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u = get()
	want("an update without deletionTimestamp", u.GetDeletionTimestamp() != nil && u.GetAnnotations()["touched"] == "yes",
		"deletionTimestamp %v annotations %v, want it kept and the annotation written", u.GetDeletionTimestamp(), u.GetAnnotations())

	u.SetFinalizers(nil)
	if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = ri.Get(ctx, "rules", metav1.GetOptions{})
	want("the last finalizer removed while deleting", apierrors.IsNotFound(err), "%v, want NotFound", err)
}

func TestFakePoolAPIRules(t *testing.T) {
	checkPoolAPIRules(t, context.Background(), fakePoolAPI().Resource(IPPoolGVR))
}
