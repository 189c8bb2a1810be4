//go:build k8s

package metallb

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lab/k8slab"
	edgek8s "github.com/edgelb/edgelb/lb/k8s"
)

// TestK8sMigratedObjectsAccepted: the IPPools converted from every MetalLB
// example are accepted by the real API server (CRD schema and CEL rules),
// and edgelb's controller, with handleClassless as MetalLB serves, then
// gives class-less Services carrying MetalLB's (legacy) annotations the
// addresses MetalLB would have given them.
func TestK8sMigratedObjectsAccepted(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	var objs []*Object
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		o, _, err := ReadDocuments(fh, f, true)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	res, err := Convert(objs, Options{L2Interface: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := res.Objects()
	if err != nil {
		t.Fatal(err)
	}
	l := k8slab.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := k8slab.Apply(ctx, l.Config, docs); err != nil {
		t.Fatalf("the API server refused the migrated IPPools: %v\n%s", err, docs)
	}
	if n := bytes.Count(docs, []byte("kind: IPPool")); n != 7 {
		t.Fatalf("%d IPPools, want 7 (one per MetalLB pool in testdata)", n)
	}
	cs := l.Clientset()
	for _, ns := range []string{"edgelb-system", "apps", "namespace-a"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := edgek8s.NewForConfig(l.Config, edgek8s.Options{NodeName: "gw1", Identity: "migrate", HandleClassless: true,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	svc := func(name string, port int32, ann map[string]string) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Annotations: ann},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "p", Port: port, Protocol: corev1.ProtocolTCP}}}}
		if _, err := cs.CoreV1().Services("apps").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What MetalLB gives each: the requested address; else the lowest free
	// address of the named pool (avoidBuggyIPs skips .0 and .255).
	want := map[string]string{
		"requested": "192.168.1.245",
		"expensive": "42.176.25.64",
		"cheap":     "192.168.144.1",
		"share-a":   "192.168.10.7",
		"share-b":   "192.168.10.7",
		"legacy":    "203.0.113.0",
		// serviceallocation.yaml's ns-pool admits namespace-a Services labelled app=bar.
		"selected": "192.168.20.0",
	}
	svc("requested", 80, map[string]string{"metallb.universe.tf/loadBalancerIPs": "192.168.1.245"})
	svc("expensive", 80, map[string]string{"metallb.universe.tf/address-pool": "expensive"})
	svc("cheap", 80, map[string]string{"metallb.io/address-pool": "cheap"})
	svc("share-a", 80, map[string]string{"metallb.universe.tf/loadBalancerIPs": "192.168.10.7", "metallb.universe.tf/allow-shared-ip": "k"})
	svc("share-b", 443, map[string]string{"metallb.io/loadBalancerIPs": "192.168.10.7", "metallb.universe.tf/allow-shared-ip": "k"})
	svc("legacy", 80, map[string]string{"metallb.universe.tf/address-pool": "legacy"})
	sel := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "selected", Namespace: "namespace-a", Labels: map[string]string{"app": "bar"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "p", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := cs.CoreV1().Services("namespace-a").Create(ctx, sel, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := map[string]string{}
		list, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			if ing := s.Status.LoadBalancer.Ingress; len(ing) == 1 {
				got[s.Name] = ing[0].IP
			}
		}
		ok := true
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("addresses after 2m: %v\nwant %v", got, want)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}
