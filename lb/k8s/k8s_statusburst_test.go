//go:build k8s

package k8s

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestK8sStatusBurst: 200 new Services at once, the controller's client
// built from a rest.Config without rate limits set (what a kubeconfig or the
// in-cluster config gives). Every status is written within 60 s — at
// client-go's own default (5 requests a second for 400 status writes and
// events) it cannot take less than 78 s — and the leader stays the leader
// while the writes queue with its Lease renewals in one rate limiter.
func TestK8sStatusBurst(t *testing.T) {
	e := newEnv(t)
	e.pool(t, "big", true, "192.0.2.0/24")
	cfg := rest.CopyConfig(e.lab.Config)
	cfg.QPS, cfg.Burst = 0, 0
	opts := testOptions("gw1")
	opts.RetryPeriod = 500 * time.Millisecond
	r := e.startAs(t, cfg, opts)
	waitUntil(t, 15*time.Second, "leading", r.c.IsLeader)

	var lost atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if !r.c.IsLeader() {
				lost.Add(1)
			}
		}
	}()
	const n = 200
	const ns = "apps"
	start := time.Now()
	for i := range n {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst%03d", i), Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
		class(DefaultClass)(s)
		if _, err := e.cs.CoreV1().Services(ns).Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	written := func() int {
		l, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return 0
		}
		k := 0
		for _, s := range l.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				k++
			}
		}
		return k
	}
	waitUntil(t, 60*time.Second, fmt.Sprintf("all %d statuses written", n), func() bool { return written() == n })
	took := time.Since(start)
	close(stop)
	<-done
	t.Logf("MEASURED status-burst services=%d client_qps=default(%d) all_written_s=%.1f leader_lost_samples=%d", n, DefaultQPS, took.Seconds(), lost.Load())
	if lost.Load() > 0 {
		t.Fatalf("the leader was not the leader in %d samples (every 20 ms) while %d statuses were written", lost.Load(), n)
	}
}
