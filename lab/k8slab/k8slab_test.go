//go:build k8s

package k8slab

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestK8sLab starts the lab, checks the CRD is served, and restarts the
// apiserver (what the "API server gone" fault needs) with etcd's data kept.
func TestK8sLab(t *testing.T) {
	t0 := time.Now()
	l := Start(t)
	t.Logf("lab up (etcd + kube-apiserver + CRDs) in %s at %s", time.Since(t0).Round(time.Millisecond), l.Host)
	cs := l.Clientset()
	ctx := context.Background()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server version %s", v.GitVersion)
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("edgelb.io/v1alpha1"); err != nil {
		t.Fatalf("IPPool CRD not served: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &metav1ObjectNamespace, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := l.RestartAPIServer(0); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %s", time.Since(t1).Round(time.Millisecond))
	if _, err := cs.CoreV1().Namespaces().Get(ctx, metav1ObjectNamespace.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace lost across apiserver restart: %v", err)
	}
}
