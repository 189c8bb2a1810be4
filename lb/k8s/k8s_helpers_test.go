//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgelb/edgelb/lab/k8slab"
)

// env is a real apiserver with the CRD installed and the lease namespace.
type env struct {
	lab *k8slab.Lab
	cs  kubernetes.Interface
	dyn dynamic.Interface
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	l := k8slab.Start(t)
	e := &env{lab: l, cs: l.Clientset(), dyn: l.Dynamic(), ctx: context.Background()}
	for _, ns := range []string{"edgelb-system", "apps"} {
		if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// testOptions: short leases so takeovers are measured in seconds.
func testOptions(id string) Options {
	lvl := slog.LevelWarn
	if os.Getenv("EDGELB_TEST_LOG") != "" {
		lvl = slog.LevelDebug
	}
	return Options{
		NodeName: "gw1", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("id", id),
	}
}

// running is one controller instance; stop is idempotent.
type running struct {
	c    *Controller
	stop func()
}

func (e *env) start(t testing.TB, opts Options) *running {
	t.Helper()
	return e.startAs(t, e.lab.Config, opts)
}

func (e *env) startAs(t testing.TB, cfg *rest.Config, opts Options, mut ...func(*Controller)) *running {
	t.Helper()
	c, err := NewForConfig(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mut {
		m(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("controller %s: %v", opts.Identity, err)
		}
		close(done)
	}()
	var once sync.Once
	r := &running{c: c, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(r.stop)
	return r
}

func (e *env) pool(t testing.TB, name string, auto bool, addrs ...string) {
	t.Helper()
	if err := e.tryPool(name, auto, addrs...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) tryPool(name string, auto bool, addrs ...string) error {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(IPPoolGVK)
	u.SetName(name)
	a := make([]any, len(addrs))
	for i, s := range addrs {
		a[i] = s
	}
	u.Object["spec"] = map[string]any{"addresses": a, "autoAssign": auto}
	_, err := e.dyn.Resource(IPPoolGVR).Create(e.ctx, u, metav1.CreateOptions{})
	return err
}

type svcOpt func(*corev1.Service)

func class(c string) svcOpt { return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &c } }
func ann(k, v string) svcOpt {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}
func ports(ps ...int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for _, p := range ps {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP})
		}
	}
}
func families(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) svcOpt {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &policy; s.Spec.IPFamilies = fams }
}

func (e *env) svc(t testing.TB, ns, name string, opts ...svcOpt) *corev1.Service {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	class(DefaultClass)(s)
	for _, o := range opts {
		o(s)
	}
	out, err := e.cs.CoreV1().Services(ns).Create(e.ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return out
}

func (e *env) ingress(ns, name string) []string {
	s, err := e.cs.CoreV1().Services(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// waitIngress waits until the Service's ingress is exactly want (sorted as written).
func (e *env) waitIngress(t testing.TB, ns, name string, limit time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := e.ingress(ns, name)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s ingress = %v, want %v (after %s); events: %s", ns, name, got, want, limit, e.eventSummary(ns, name))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAny waits until the Service has n ingress addresses and returns them.
func (e *env) waitAny(t testing.TB, ns, name string, n int, limit time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := e.ingress(ns, name)
		if len(got) == n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s ingress = %v, want %d address(es); events: %s", ns, name, got, n, e.eventSummary(ns, name))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) events(ns, name string) []corev1.Event {
	l, err := e.cs.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		return nil
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].LastTimestamp.Before(&l.Items[j].LastTimestamp) })
	return l.Items
}

func (e *env) eventSummary(ns, name string) string {
	var b strings.Builder
	for _, ev := range e.events(ns, name) {
		fmt.Fprintf(&b, "[%s %s: %s] ", ev.Type, ev.Reason, ev.Message)
	}
	return b.String()
}

// waitEvent waits for an Event of type/reason whose message contains sub.
func (e *env) waitEvent(t testing.TB, ns, name, typ, reason, sub string, limit time.Duration) corev1.Event {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		for _, ev := range e.events(ns, name) {
			if ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Message, sub) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s %s event containing %q on %s/%s; got %s", typ, reason, sub, ns, name, e.eventSummary(ns, name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) deleteSvc(t testing.TB, ns, name string) {
	t.Helper()
	if err := e.cs.CoreV1().Services(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func (e *env) poolStatus(t testing.TB, name string) (size, used int64, valid, msg string) {
	t.Helper()
	u, err := e.dyn.Resource(IPPoolGVR).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	size, _, _ = unstructured.NestedInt64(u.Object, "status", "size")
	used, _, _ = unstructured.NestedInt64(u.Object, "status", "used")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if len(conds) > 0 {
		c, _ := conds[0].(map[string]any)
		valid, _ = c["status"].(string)
		msg, _ = c["message"].(string)
	}
	return
}

func waitUntil(t testing.TB, limit time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !ok() {
		if time.Since(t0) > limit {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}
