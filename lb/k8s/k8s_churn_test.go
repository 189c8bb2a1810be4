//go:build k8s

package k8s

import (
	"fmt"
	"math/rand"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// churnObserver follows every Service through an informer and counts
// duplicate addresses and address changes of Services that kept theirs.
type churnObserver struct {
	mu      sync.Mutex
	cur     map[types.UID]*corev1.Service
	dups    map[string]bool // "ip a b" incidents seen
	changes []string
	everHad map[types.UID]bool
	events  int
}

func (o *churnObserver) update(s *corev1.Service, deleted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events++
	if deleted {
		delete(o.cur, s.UID)
		return
	}
	if old, ok := o.cur[s.UID]; ok {
		// A change is an address the Service had and no longer has
		// (gaining a second family later is not a change).
		now := map[string]bool{}
		for _, in := range s.Status.LoadBalancer.Ingress {
			now[in.IP] = true
		}
		for _, in := range old.Status.LoadBalancer.Ingress {
			if !now[in.IP] {
				o.changes = append(o.changes, fmt.Sprintf("%s/%s lost %s (now %v)", s.Namespace, s.Name, in.IP, s.Status.LoadBalancer.Ingress))
			}
		}
	}
	o.cur[s.UID] = s
	if len(s.Status.LoadBalancer.Ingress) > 0 {
		o.everHad[s.UID] = true
	}
	var all []corev1.Service
	for _, x := range o.cur {
		all = append(all, *x)
	}
	if _, which := duplicates(all); len(which) > 0 {
		for _, w := range which {
			o.dups[w] = true
		}
	}
}

// TestK8sChurn: 50 controller restarts (half clean, half kill-like) while a
// random workload creates, deletes and edits Services, with the v4 pool
// nearly full so Services wait and take freed addresses across restarts.
// A negative control runs the same churn with adoption switched off, to show
// the counters catch what restart safety prevents.
func TestK8sChurn(t *testing.T) {
	restarts := 50
	if testing.Short() {
		restarts = 10
	}
	dups, changes := churn(t, restarts, false)
	t.Logf("MEASURED churn: duplicate IPs %d, IP changes for Services that kept theirs %d", dups, changes)
	if dups != 0 || changes != 0 {
		t.Fatal("restart safety violated")
	}
	t.Run("NegativeControlWithoutAdoption", func(t *testing.T) {
		dups, changes := churn(t, 5, true)
		t.Logf("negative control, adoption off, 5 restarts: duplicate IPs %d, IP changes %d (the counters do see breakage)", dups, changes)
		if dups+changes == 0 {
			t.Fatal("the churn counters saw nothing with adoption off: they prove nothing")
		}
	})
}

func churn(t *testing.T, restarts int, noAdopt bool) (int, int) {
	e := newEnv(t)
	e.pool(t, "main", true, "192.0.2.0/26") // 64 IPv4 addresses for ~70 Services
	e.pool(t, "six", true, "2001:db8::/120")
	const ns = "apps"
	mut := func(c *Controller) { c.noAdopt = noAdopt }

	obs := &churnObserver{cur: map[types.UID]*corev1.Service{}, dups: map[string]bool{}, everHad: map[types.UID]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.lab.Clientset(), 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Services().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { obs.update(o.(*corev1.Service), false) },
		UpdateFunc: func(_, o any) { obs.update(o.(*corev1.Service), false) },
		DeleteFunc: func(o any) {
			if s, ok := o.(*corev1.Service); ok {
				obs.update(s, true)
			} else if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				obs.update(d.Obj.(*corev1.Service), true)
			}
		},
	})
	stopInf := make(chan struct{})
	defer close(stopInf)
	f.Start(stopInf)
	f.WaitForCacheSync(stopInf)

	// The workload: bounded in time by the restarts, at most ~40 ops/s.
	rng := rand.New(rand.NewSource(42))
	var (
		wmu                     sync.Mutex
		live                    []string
		creates, deletes, edits int
		seq                     int
	)
	stopWork := make(chan struct{})
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		for {
			select {
			case <-stopWork:
				return
			case <-time.After(time.Duration(10+rng.Intn(40)) * time.Millisecond):
			}
			wmu.Lock()
			n := len(live)
			op := rng.Intn(10)
			switch {
			case n < 60 || (n < 80 && op < 4):
				seq++
				name := fmt.Sprintf("c%04d", seq)
				var opts []svcOpt
				switch k := rng.Intn(20); {
				case k < 3:
					opts = append(opts, ann(AnnotationShared, "shared"), ports(int32(1000+seq)))
				case k < 5:
					opts = append(opts, families(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol))
				case k < 6:
					opts = append(opts, ann(AnnotationIPs, fmt.Sprintf("192.0.2.%d", rng.Intn(64))))
				case k < 7:
					opts = append(opts, families(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol))
				}
				s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
				class(DefaultClass)(s)
				for _, o := range opts {
					o(s)
				}
				if _, err := e.cs.CoreV1().Services(ns).Create(e.ctx, s, metav1.CreateOptions{}); err == nil {
					live = append(live, name)
					creates++
				}
			case n > 80 || op < 7:
				i := rng.Intn(n)
				if err := e.cs.CoreV1().Services(ns).Delete(e.ctx, live[i], metav1.DeleteOptions{}); err == nil {
					deletes++
				}
				live = append(live[:i], live[i+1:]...)
			default:
				name := live[rng.Intn(n)]
				s, err := e.cs.CoreV1().Services(ns).Get(e.ctx, name, metav1.GetOptions{})
				if err == nil {
					if s.Annotations == nil {
						s.Annotations = map[string]string{}
					}
					s.Annotations["churn/edit"] = fmt.Sprint(seq)
					if s.Annotations[AnnotationShared] == "" && rng.Intn(2) == 0 {
						s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("x%d", seq), Port: int32(2000 + seq%1000)})
					}
					if _, err := e.cs.CoreV1().Services(ns).Update(e.ctx, s, metav1.UpdateOptions{}); err == nil {
						edits++
					}
				}
			}
			wmu.Unlock()
		}
	}()

	kills := 0
	var adopt []time.Duration
	for i := 0; i < restarts; i++ {
		o := testOptions("gw1")
		o.KeepLeaseOnStop = i%2 == 1 // odd runs end like a crash: Lease kept
		r := e.startAs(t, e.lab.Config, o, mut)
		t0 := time.Now()
		waitUntil(t, 30*time.Second, "leading", r.c.IsLeader)
		adopt = append(adopt, time.Since(t0))
		time.Sleep(time.Duration(150+rng.Intn(350)) * time.Millisecond)
		r.stop()
		if o.KeepLeaseOnStop {
			kills++
		}
	}
	close(stopWork)
	<-workDone

	// A last instance converges everything.
	r := e.startAs(t, e.lab.Config, testOptions("gw1"), mut)
	waitUntil(t, 30*time.Second, "leading", r.c.IsLeader)
	waitUntil(t, 30*time.Second, "convergence", func() bool {
		list, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		v4 := 0
		waitingV4 := 0
		for _, s := range list.Items {
			has4 := false
			for _, in := range s.Status.LoadBalancer.Ingress {
				if netip.MustParseAddr(in.IP).Is4() {
					has4 = true
					v4++
				}
			}
			wants4 := len(s.Spec.IPFamilies) == 0 || s.Spec.IPFamilies[0] == corev1.IPv4Protocol || len(s.Spec.IPFamilies) == 2
			if wants4 && !has4 && s.Annotations[AnnotationIPs] == "" {
				waitingV4++
			}
		}
		// Converged: nobody waits for IPv4 while IPv4 addresses are free
		// (shared Services make v4 ≥ distinct addresses, hence ≥ 60).
		return waitingV4 == 0 || v4 >= 60
	})
	time.Sleep(500 * time.Millisecond)

	list, err := e.cs.CoreV1().Services(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	finalDups, which := duplicates(list.Items)
	obs.mu.Lock()
	seenDups := len(obs.dups)
	changes := append([]string(nil), obs.changes...)
	had := len(obs.everHad)
	events := obs.events
	obs.mu.Unlock()
	var withIP, pending int
	for _, s := range list.Items {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			withIP++
		} else {
			pending++
		}
	}
	sort.Slice(adopt, func(i, j int) bool { return adopt[i] < adopt[j] })
	t.Logf("churn: %d restarts (%d kill-like, Lease kept), workload %d creates / %d deletes / %d edits, %d watch events",
		restarts, kills, creates, deletes, edits, events)
	t.Logf("churn: start→leading p50 %s max %s; %d Services ever got an address; at the end %d with address, %d waiting",
		adopt[len(adopt)/2].Round(time.Millisecond), adopt[len(adopt)-1].Round(time.Millisecond), had, withIP, pending)
	t.Logf("churn: duplicate IPs at the end %d, seen at any moment %d; IP changes for Services that kept theirs %d",
		finalDups, seenDups, len(changes))
	if !noAdopt && (finalDups != 0 || seenDups != 0 || len(changes) != 0) {
		for d := range obs.dups {
			t.Logf("duplicate: %s", d)
		}
		t.Logf("duplicates %v; changes: %s", which, strings.Join(changes, "; "))
	}
	return max(finalDups, seenDups), len(changes)
}
