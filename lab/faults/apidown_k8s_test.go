//go:build k8s

package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/lab/k8slab"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/lb/k8s"
)

// relayAPI listens on hostAddr (127.0.0.1:port) inside ns and relays each
// connection to the same address in the test's own namespace, where the
// lab's kube-apiserver listens: the daemon in the gateway namespace uses the
// lab's kubeconfig unchanged. Only loopback is involved on both sides.
func relayAPI(t *testing.T, ns *netns.NS, hostAddr string) {
	t.Helper()
	ln, err := ns.Listen("tcp", hostAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.DialTimeout("tcp", hostAddr, 3*time.Second)
				if err != nil {
					return // the apiserver is down: the client sees a reset
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, u)
			}()
		}
	}()
}

// k8sConfig is the daemon's config in Kubernetes mode: no pools or
// services (they come from the API server), L2 on the front interface.
func (e *env) k8sConfig(kubeconfig string) string {
	return fmt.Sprintf(`kubernetes:
  enabled: true
  kubeconfig: %s
  nodeName: gw1
announce:
  l2:
    interface: %s
dataplane:
  mode: nftables
  nodeAddresses: ["%s"]
api:
  listen: %s
  tokenFile: %s
state:
  dir: %s
`, kubeconfig, e.lab.FrontIf, demo.GatewayFront.Addr(), apiListen, e.token, e.dir+"/state")
}

func ptr[T any](v T) *T { return &v }

// startK8sDaemon starts the lab's kube-apiserver (namespaces edgelb-system
// and apps, IPPool "demo" over the demo pool range) and the daemon in
// Kubernetes mode in a lab with the given backends, reaching the API
// server through relayAPI; it returns once the daemon is ready.
func startK8sDaemon(t *testing.T, prefix string, backends int) (*env, *k8slab.Lab) {
	t.Helper()
	kl := k8slab.Start(t)
	ctx := context.Background()
	cs := kl.Clientset()
	for _, ns := range []string{"edgelb-system", "apps"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pool := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"addresses": []any{demo.PoolRange}, "autoAssign": true}}}
	pool.SetGroupVersionKind(k8s.IPPoolGVK)
	pool.SetName("demo")
	if _, err := kl.Dynamic().Resource(k8s.IPPoolGVR).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, prefix, backends)
	u, err := url.Parse(kl.Host)
	if err != nil {
		t.Fatal(err)
	}
	relayAPI(t, e.lab.Gateway, u.Host)
	e.start(e.k8sConfig(kl.Kubeconfig))
	e.waitReady(2 * time.Minute)
	return e, kl
}

func endpointSlice(ns, svc string, addrs []netip.AddrPort, ready []bool) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(demo.BackendPort)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for i, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.Addr().String()}, NodeName: ptr("n1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready[i]), Serving: ptr(ready[i]), Terminating: ptr(false)}})
	}
	return sl
}

func createService(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr(k8s.DefaultClass),
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(int32(demo.BackendPort)), Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s: %v", name, err)
	}
}

func ingressIP(ctx context.Context, cs kubernetes.Interface, ns, name string) netip.Addr {
	s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
	return a
}

// TestK8sAPIServerGone60s: the daemon runs in Kubernetes mode in the lab's
// gateway (a real kube-apiserver + etcd from lab/k8slab; a Service and an
// EndpointSlice over the lab's three backends). The API server is killed
// for 60 s (EDGELB_APIDOWN) while clients keep sending requests through the
// VIP: the dataplane keeps serving the last state (no failed request, the
// kernel unchanged); once the API server is back, an EndpointSlice change
// and a new Service reach the kernel, and the time they take is printed.
func TestK8sAPIServerGone60s(t *testing.T) {
	netns.RequireRoot(t)
	down := 60 * time.Second
	if v := os.Getenv("EDGELB_APIDOWN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGELB_APIDOWN %q: %v", v, err)
		}
		down = d
	}
	e, kl := startK8sDaemon(t, "fla", 3)
	ctx := context.Background()
	cs := kl.Clientset()

	var backends []netip.AddrPort
	for _, b := range e.lab.Backends {
		backends = append(backends, b.Addr)
	}
	createService(ctx, t, cs, "apps", "web")
	sl, err := cs.DiscoveryV1().EndpointSlices("apps").Create(ctx, endpointSlice("apps", "web", backends, []bool{true, true, true}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vip netip.Addr
	if _, ok := waitFor(60*time.Second, 100*time.Millisecond, func() bool { vip = ingressIP(ctx, cs, "apps", "web"); return vip.IsValid() }); !ok {
		t.Fatalf("web never got an address\n%s", e.logs.Tail(30))
	}
	want := []svcDef{{Name: "web", VIP: vip, Port: 80}}
	for _, b := range backends {
		want[0].Backends = append(want[0].Backends, beDef{b, 1})
	}
	e.converged("web programmed", want)
	target := fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, 80))
	e.trafficOK("before the outage", want[0])

	lctx, stop := context.WithCancel(ctx)
	res, wait := e.runLoad(lctx, target, 4, 20*time.Millisecond)
	time.Sleep(2 * time.Second)
	if err := kl.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	tDown := time.Now()
	checks := 0
	for time.Since(tDown) < down {
		time.Sleep(min(5*time.Second, down-time.Since(tDown)))
		e.alive()
		k, err := readKernel(e.lab.Gateway, "ip")
		if err != nil {
			t.Fatalf("%s into the outage: %v", time.Since(tDown).Round(time.Second), err)
		}
		if p := k.diff(want, []netip.Addr{demo.GatewayFront.Addr()}); len(p) > 0 {
			t.Fatalf("%s into the outage the kernel changed: %s", time.Since(tDown).Round(time.Second), summary(p))
		}
		checks++
	}
	res.mu.Lock()
	during, failedDuring := res.total, len(res.errs)
	res.mu.Unlock()
	t.Logf("API server down %s: kernel unchanged at %d checks, %d requests through the VIP, %d failed", down, checks, during, failedDuring)

	tUp := time.Now()
	if err := kl.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiReady := time.Since(tUp)
	// An endpoint change: backend-3 not ready any more.
	sl.Endpoints[2].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}
	if _, err := cs.DiscoveryV1().EndpointSlices("apps").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	want[0].Backends = want[0].Backends[:2]
	var probs []string
	took, ok := waitFor(3*time.Minute, 100*time.Millisecond, func() bool {
		k, err := readKernel(e.lab.Gateway, "ip")
		if err != nil {
			probs = []string{err.Error()}
			return false
		}
		probs = k.diff(want, []netip.Addr{demo.GatewayFront.Addr()})
		return len(probs) == 0
	})
	if !ok {
		t.Fatalf("the endpoint change never reached the kernel: %s", summary(probs))
	}
	// A new Service.
	createService(ctx, t, cs, "apps", "web2")
	if _, err := cs.DiscoveryV1().EndpointSlices("apps").Create(ctx, endpointSlice("apps", "web2", backends[:1], []bool{true}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vip2 netip.Addr
	took2, ok := waitFor(3*time.Minute, 100*time.Millisecond, func() bool {
		if vip2 = ingressIP(ctx, cs, "apps", "web2"); !vip2.IsValid() {
			return false
		}
		k, err := readKernel(e.lab.Gateway, "ip")
		return err == nil && len(k.diff(append(want[:1:1], svcDef{Name: "web2", VIP: vip2, Port: 80, Backends: []beDef{{backends[0], 1}}}), []netip.Addr{demo.GatewayFront.Addr()})) == 0
	})
	if !ok {
		t.Fatalf("the new Service never reached the kernel")
	}
	e.trafficOK("the new Service", svcDef{VIP: vip2, Port: 80})
	time.Sleep(time.Second)
	stop()
	wait()
	res.mu.Lock()
	defer res.mu.Unlock()
	t.Logf("MEASURED Kubernetes API server gone %s: dataplane kept serving (kernel unchanged at %d checks; %d requests through the VIP during the outage, %d failed; %d in all, %d failed); API server back (ready in %s): endpoint change in the kernel %s after the update (%s after the restart began), a new Service served %s after its creation; load %s",
		down, checks, during, failedDuring, res.total, len(res.errs), apiReady.Round(time.Millisecond),
		took.Round(time.Millisecond), (changed.Sub(tUp) + took).Round(time.Millisecond),
		took2.Round(time.Millisecond), netns.Loadavg())
	if len(res.errs) > 0 {
		t.Errorf("%d requests failed, e.g. %s", len(res.errs), strings.Join(res.errs[:min(5, len(res.errs))], "; "))
	}
}
