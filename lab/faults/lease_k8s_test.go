//go:build k8s

package faults

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestK8sSIGTERMReleasesLease (issues 13, 35): two real daemons in
// Kubernetes mode with the production election defaults (15 s lease,
// 10 s renew deadline, 15/7 s retry) share one API server. Ten times the
// leader gets SIGTERM; the other must lead at once: the leader releases the
// Lease before it exits (issue 13: 18–21 s before, the Lease expired), and
// the waiting daemon sees the release on its watch of the Lease and tries
// then, not at its next retry (issue 35: 0.5 s and 3.4 s before, a retry
// comes every 2.1–4.7 s). The stopped daemon is started again as the next
// trial's waiting instance.
func TestK8sSIGTERMReleasesLease(t *testing.T) {
	netns.RequireRoot(t)
	ea, kl := startK8sDaemon(t, "fll", 1)
	eb := newEnv(t, "flm", 1)
	u, err := url.Parse(kl.Host)
	if err != nil {
		t.Fatal(err)
	}
	relayAPI(t, eb.lab.Gateway, u.Host)
	eb.start(eb.k8sConfig(kl.Kubeconfig))
	eb.waitReady(2 * time.Minute)

	ctx := context.Background()
	cs := kl.Clientset()
	holder := func() string {
		l, err := cs.CoordinationV1().Leases("edgelb-system").Get(ctx, "edgelb", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// The default identity is <host name>-<pid>.
	holds := func(e *env) bool { return strings.HasSuffix(holder(), fmt.Sprintf("-%d", e.d.PID())) }
	const trials = 10
	var took []time.Duration
	for i := range trials {
		var leader, next *env
		if _, ok := waitFor(60*time.Second, 20*time.Millisecond, func() bool {
			switch {
			case holds(ea):
				leader, next = ea, eb
			case holds(eb):
				leader, next = eb, ea
			default:
				return false
			}
			return true
		}); !ok {
			t.Fatalf("trial %d: neither daemon holds the Lease (holder %q)", i, holder())
		}
		// Both daemons are up: the waiting one campaigns (its elector has
		// run, or runs at once and finds the Lease released).
		leader.signal(syscall.SIGTERM)
		d, ok := waitFor(30*time.Second, 5*time.Millisecond, func() bool { return holds(next) })
		if !ok {
			t.Fatalf("trial %d: the waiting daemon did not lead within 30 s of SIGTERM (holder %q)\n%s", i, holder(), next.logs.Tail(30))
		}
		select {
		case <-leader.d.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("trial %d: the daemon did not exit within 30 s of SIGTERM", i)
		}
		if err := leader.d.Err(); err != nil {
			t.Errorf("trial %d: the daemon's exit: %v\n%s", i, err, leader.logs.Tail(20))
		}
		took = append(took, d)
		t.Logf("trial %d: next leader %s after SIGTERM (load %s)", i, d.Round(time.Millisecond), netns.Loadavg())
		// Without a release the next leader waits for the Lease to expire:
		// 15 s after the last renewal, which comes every 15/7 s, so ≥ 12.8 s
		// after SIGTERM. 8 s tells a release from an expiry on a busy
		// machine too; how fast a release is taken is the MEASURED line.
		if d > 8*time.Second {
			t.Errorf("trial %d: the next leader took %s after SIGTERM, want < 8 s (a released Lease; an expired one takes ≥ 12.8 s)", i, d.Round(time.Millisecond))
		}
		if i < trials-1 {
			leader.start(leader.k8sConfig(kl.Kubeconfig))
			leader.waitReady(2 * time.Minute)
		}
	}
	slices.Sort(took)
	p := func(q float64) time.Duration { return took[max(0, int(float64(len(took))*q+0.999999)-1)] }
	verdict := "met"
	if p(0.99) >= time.Second {
		verdict = "MISSED"
	}
	t.Logf("MEASURED k8s-leader-handover trials=%d p50_ms=%d p99_ms=%d max_ms=%d goal=p99<1000ms:%s (two daemons, lease 15 s, retry 15/7 s; load %s)",
		len(took), p(0.5).Milliseconds(), p(0.99).Milliseconds(), took[len(took)-1].Milliseconds(), verdict, netns.Loadavg())
}
