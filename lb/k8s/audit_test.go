package k8s

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/edgelb/edgelb/lb/audit"
)

type auditRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *auditRecorder) Record(a audit.Actor, cs []audit.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.got = append(r.got, fmt.Sprintf("%s %s %s %s before=%q after=%q", a.Identity, a.Source, c.Action, c.Object, c.Before, c.After))
	}
}

func (r *auditRecorder) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if strings.Contains(g, sub) {
			return true
		}
	}
	return false
}

// TestControllerAudit (issue 36): in cluster mode the controller is the
// writer, so what it acts on is in the audit trail: an IPPool changed and
// one created during the term (the pools a new leader finds are not
// changes), an address assigned to a Service (naming the Service's
// last field manager) and released when the Service goes.
func TestControllerAudit(t *testing.T) {
	rec := &auditRecorder{}
	_, cs, dyn, ctx := leadingFakeOpts(t, Options{Audit: rec}, nil, poolObj("small", 0, "192.0.2.0/30"))
	// The API server (and client-go's fake) records the writer as the
	// field manager; kubectl names itself so.
	if _, err := cs.CoreV1().Services("default").Create(ctx, lbService("web"), metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "assignment audited", func() bool {
		return rec.has(`kubernetes/kubectl-client-side-apply kubernetes create service/default/web before="" after="addresses 192.0.2.`)
	})
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "release audited", func() bool {
		return rec.has(`kubernetes kubernetes delete service/default/web before="addresses 192.0.2.`)
	})

	gvr := schema.GroupVersionResource{Group: "edgelb.io", Version: "v1alpha1", Resource: "ippools"}
	u, err := dyn.Resource(gvr).Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{"192.0.2.0/29"}, "spec", "addresses")
	if _, err := dyn.Resource(gvr).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	more := poolObj("more", time.Second, "198.51.100.0/29")
	now := metav1.Now()
	more.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now}})
	if _, err := dyn.Resource(gvr).Create(ctx, more, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "new pool audited", func() bool {
		return rec.has(`kubernetes/kubectl-create kubernetes create ippool/more before="" after="addresses 198.51.100.0/29"`)
	})
	waitFor(t, 30*time.Second, "pool change audited", func() bool {
		return rec.has(`update ippool/small before="addresses 192.0.2.0/30" after="addresses 192.0.2.0/29"`)
	})
	rec.mu.Lock()
	t.Logf("audit entries:\n%s", strings.Join(rec.got, "\n"))
	rec.mu.Unlock()
}
