package k8s

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
)

// Manager returns the lb.Manager of Kubernetes mode: pools are the IPPool
// objects (one source of truth: the REST API edits them, as kubectl does);
// Services are read-only (they belong to the cluster).
func (c *Controller) Manager() lb.Manager { return manager{c} }

type manager struct{ c *Controller }

// Version moves whenever Pools or Services may list something new (the
// web UI skips its poll while it holds).
func (m manager) Version() uint64 { return m.c.version.Load() }

var _ lb.Manager = manager{}

// ErrReadOnly is returned (inside a *lb.ConflictError) for Service writes.
var errReadOnly = errors.New("services are read-only in Kubernetes mode: edit the Service object in the cluster")

// used counts the distinct ingress addresses of our Services inside p,
// from the cache: correct on every gateway, leader or not.
func (m manager) used(pools []lb.Pool) map[string]int {
	seen := map[netip.Addr]bool{}
	svcs, _ := m.c.services.List(labels.Everything())
	for _, s := range svcs {
		if m.c.opts.ours(s) {
			for _, ip := range ingressIPs(s) {
				seen[ip] = true
			}
		}
	}
	out := map[string]int{}
	for ip := range seen {
		if p := poolOf(pools, ip); p != "" {
			out[p]++
		}
	}
	return out
}

func (m manager) poolObjects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range m.c.poolInf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

func (m manager) status(p lb.Pool, used map[string]int) lb.PoolStatus {
	size := poolSize(&p)
	st := lb.PoolStatus{Pool: p, Used: used[p.Name], Size: uint64(size), Origin: lb.OriginKubernetes}
	if size == math.MaxInt64 {
		st.Size = math.MaxUint64
	}
	return st
}

func (m manager) Pools(ctx context.Context) ([]lb.PoolStatus, error) {
	ps := computePools(m.poolObjects(), m.c.parsePool)
	used := m.used(ps.Valid)
	out := make([]lb.PoolStatus, 0, len(ps.Valid))
	for _, p := range ps.Valid {
		out = append(out, m.status(p, used))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m manager) Pool(ctx context.Context, name string) (lb.PoolStatus, error) {
	ps := computePools(m.poolObjects(), m.c.parsePool)
	for _, p := range ps.Valid {
		if p.Name == name {
			return m.status(p, m.used(ps.Valid)), nil
		}
	}
	if err, bad := ps.Rejected[name]; bad {
		return lb.PoolStatus{}, fmt.Errorf("IPPool %q is not in use: %w", name, err)
	}
	return lb.PoolStatus{}, fmt.Errorf("pool %q: %w", name, lb.ErrNotFound)
}

// check validates p against the other pools as the controller will.
func (m manager) check(p *lb.Pool) error {
	if err := lb.ValidatePool(p, m.c.ownAddrs()); err != nil {
		return err
	}
	return lb.CheckOverlap(p, computePools(m.poolObjects(), m.c.parsePool).Valid)
}

func (m manager) CreatePool(ctx context.Context, p lb.Pool) (lb.PoolStatus, error) {
	if err := m.check(&p); err != nil {
		return lb.PoolStatus{}, err
	}
	_, err := m.c.dyn.Resource(IPPoolGVR).Create(ctx, poolToObject(p), metav1.CreateOptions{FieldManager: "edgelb-api"})
	if apierrors.IsAlreadyExists(err) {
		return lb.PoolStatus{}, &lb.ConflictError{Field: "name", Value: p.Name, Reason: fmt.Sprintf("pool %q already exists", p.Name)}
	}
	if err != nil {
		return lb.PoolStatus{}, apiError("create IPPool", p.Name, err)
	}
	return m.status(p, m.used([]lb.Pool{p})), nil
}

func (m manager) UpdatePool(ctx context.Context, p lb.Pool) (lb.PoolStatus, error) {
	if err := m.check(&p); err != nil {
		return lb.PoolStatus{}, err
	}
	cur, err := m.c.dyn.Resource(IPPoolGVR).Get(ctx, p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return lb.PoolStatus{}, fmt.Errorf("pool %q: %w", p.Name, lb.ErrNotFound)
	}
	if err != nil {
		return lb.PoolStatus{}, apiError("get IPPool", p.Name, err)
	}
	if old, err := poolFromObject(cur, nil); err == nil {
		for ip := range m.assigned() {
			if old.Contains(ip) && !p.Contains(ip) {
				return lb.PoolStatus{}, &lb.ConflictError{Field: "addresses", Value: ip.String(),
					Reason: fmt.Sprintf("address %s of pool %q is assigned to a Service; it cannot be dropped", ip, p.Name)}
			}
		}
	}
	setPoolSpec(cur, p)
	if _, err := m.c.dyn.Resource(IPPoolGVR).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "edgelb-api"}); err != nil {
		if apierrors.IsConflict(err) {
			return lb.PoolStatus{}, &lb.ConflictError{Field: "name", Value: p.Name, Reason: fmt.Sprintf("pool %q changed meanwhile; retry", p.Name)}
		}
		return lb.PoolStatus{}, apiError("update IPPool", p.Name, err)
	}
	return m.status(p, m.used([]lb.Pool{p})), nil
}

func (m manager) DeletePool(ctx context.Context, name string) error {
	cur, err := m.c.dyn.Resource(IPPoolGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pool %q: %w", name, lb.ErrNotFound)
	}
	if err != nil {
		return apiError("get IPPool", name, err)
	}
	if old, err := poolFromObject(cur, nil); err == nil {
		for ip, svc := range m.assigned() {
			if old.Contains(ip) {
				return &lb.ConflictError{Field: "name", Value: name,
					Reason: fmt.Sprintf("pool %q has address %s assigned to Service %s", name, ip, svc)}
			}
		}
	}
	rv := cur.GetResourceVersion()
	err = m.c.dyn.Resource(IPPoolGVR).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pool %q: %w", name, lb.ErrNotFound)
	}
	if err != nil {
		return apiError("delete IPPool", name, err)
	}
	return nil
}

// assigned maps every ingress address of our Services to one holder.
func (m manager) assigned() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	svcs, _ := m.c.services.List(labels.Everything())
	for _, s := range svcs {
		if m.c.opts.ours(s) {
			for _, ip := range ingressIPs(s) {
				out[ip] = s.Namespace + "/" + s.Name
			}
		}
	}
	return out
}

func (m manager) Services(ctx context.Context) ([]lb.ServiceStatus, error) {
	svcs, _ := m.c.services.List(labels.Everything())
	var out []lb.ServiceStatus
	for _, s := range svcs {
		if m.c.opts.ours(s) {
			out = append(out, m.serviceStatus(s))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

// Service takes "namespace/name".
func (m manager) Service(ctx context.Context, name string) (lb.ServiceStatus, error) {
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		return lb.ServiceStatus{}, &lb.FieldError{Field: "name", Value: name, Err: errors.New("want namespace/name")}
	}
	s, err := m.c.services.Services(ns).Get(n)
	if apierrors.IsNotFound(err) || (err == nil && !m.c.opts.ours(s)) {
		return lb.ServiceStatus{}, fmt.Errorf("service %q: %w", name, lb.ErrNotFound)
	}
	if err != nil {
		return lb.ServiceStatus{}, err
	}
	return m.serviceStatus(s), nil
}

func (m manager) serviceStatus(s *corev1.Service) lb.ServiceStatus {
	st := lb.ServiceStatus{Spec: lb.ServiceSpec{Name: s.Namespace + "/" + s.Name,
		Scheduler: m.c.opts.Scheduler, Method: m.c.opts.methodFor(s)}, Origin: lb.OriginKubernetes}
	in, err := parseIntent(s, m.c.ownAddrs())
	if err == nil {
		st.Spec.Pool, st.Spec.SharingKey, st.Spec.Families = in.Req.Pool, in.Req.SharingKey, in.Families
		for _, f := range []lb.Family{lb.IPv4, lb.IPv6} {
			if a, ok := in.Requested[f]; ok {
				st.Spec.VIPs = append(st.Spec.VIPs, a)
			}
		}
	}
	for _, p := range s.Spec.Ports {
		proto, perr := proxy.ParseProtocol(string(p.Protocol))
		if perr != nil {
			continue
		}
		st.Spec.Ports = append(st.Spec.Ports, lb.PortSpec{Name: p.Name, Port: uint16(p.Port), Protocol: proto,
			NodePort: uint16(p.NodePort), TargetPort: uint16(p.TargetPort.IntValue())})
	}
	st.VIPs = ingressIPs(s)
	switch {
	case err != nil:
		st.Pending = err.Error()
	case len(st.VIPs) == 0:
		st.Pending = "waiting for an address"
		if r := m.c.view().pending[st.Spec.Name]; r != "" {
			st.Pending = r
		}
	}
	return st
}

func (m manager) PutService(ctx context.Context, s lb.ServiceSpec) (lb.ServiceStatus, bool, error) {
	return lb.ServiceStatus{}, false, &lb.ConflictError{Field: "name", Value: s.Name, Reason: errReadOnly.Error()}
}

func (m manager) DeleteService(ctx context.Context, name string) error {
	return &lb.ConflictError{Field: "name", Value: name, Reason: errReadOnly.Error()}
}

// apiError turns an apiserver refusal (schema, CEL) into a FieldError that
// quotes the server's message; other errors are wrapped as they are.
func apiError(op, name string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return &lb.FieldError{Field: "pool", Value: name, Err: fmt.Errorf("%s refused: %w", op, err)}
	}
	return fmt.Errorf("%s %q: %w", op, name, err)
}
