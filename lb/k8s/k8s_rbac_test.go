//go:build k8s

package k8s

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgelb/edgelb/lab/k8slab"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/k8s/deploy"
)

// TestK8sRBAC runs the controller as a plain user holding only the shipped
// RBAC (lb/k8s/deploy/rbac.yaml): everything it does must be allowed.
func TestK8sRBAC(t *testing.T) {
	e := newEnv(t)
	if err := k8slab.Apply(e.ctx, e.lab.Config, deploy.RBAC()); err != nil {
		t.Fatal(err)
	}
	// RBAC is enforced: a user without bindings cannot even list Services.
	nobody := kubernetes.NewForConfigOrDie(e.lab.UserConfig("nobody"))
	if _, err := nobody.CoreV1().Services("").List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("user nobody listed Services: %v", err)
	}
	cfg := e.lab.UserConfig("edgelb")
	r := e.startAs(t, cfg, testOptions("gw1"))
	waitUntil(t, 15*time.Second, "leading as user edgelb", r.c.IsLeader)

	// Pools through the Manager (the REST API's path) as that user.
	rg, _ := lb.ParseRange("192.0.2.0/29")
	if _, err := r.c.Manager().CreatePool(e.ctx, lb.Pool{Name: "api", AutoAssign: true, Ranges: []lb.Range{rg}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "pool in cache", func() bool { _, err := r.c.Manager().Pool(e.ctx, "api"); return err == nil })
	e.svc(t, "apps", "web")
	ip := e.waitAny(t, "apps", "web", 1, 30*time.Second)
	e.waitEvent(t, "apps", "web", corev1.EventTypeNormal, ReasonAllocated, ip[0], 30*time.Second)
	waitUntil(t, 30*time.Second, "pool status written", func() bool {
		size, used, valid, _ := e.poolStatus(t, "api")
		return size == 8 && used == 1 && valid == "True"
	})
	// The Manager refuses to drop an assigned address and to delete a pool in use.
	rg2, _ := lb.ParseRange("192.0.2.4/30")
	if _, err := r.c.Manager().UpdatePool(e.ctx, lb.Pool{Name: "api", AutoAssign: true, Ranges: []lb.Range{rg2}}); err == nil {
		t.Fatal("UpdatePool dropped an assigned address")
	} else {
		t.Logf("UpdatePool refused: %v", err)
	}
	if err := r.c.Manager().DeletePool(e.ctx, "api"); err == nil {
		t.Fatal("DeletePool removed a pool in use")
	} else {
		t.Logf("DeletePool refused: %v", err)
	}
	t.Logf("as user edgelb with the shipped RBAC: lease, pool create, allocation %v, status, Events and pool status all allowed", ip)
}

// TestK8sNoCRD: without the IPPool CRD the controller stops at once with
// ErrNoCRD (naming the YAML to apply) instead of waiting forever.
func TestK8sNoCRD(t *testing.T) {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, ok := k8slab.Binary(b); !ok {
			t.Skipf("%s missing: run lab/tools/build.sh", b)
		}
	}
	l, err := k8slab.New(t.TempDir()) // no CRDs installed
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop() })
	c, err := NewForConfig(l.Config, testOptions("gw1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Run(ctx)
	if !errors.Is(err, ErrNoCRD) {
		t.Fatalf("Run: %v, want ErrNoCRD", err)
	}
	t.Logf("without the CRD: %v", err)
}
