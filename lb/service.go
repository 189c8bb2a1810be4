package lb

import (
	"context"
	"net/netip"
	"time"

	"github.com/edgelb/edgelb/proxy"
)

// Family is an IP family a service wants a VIP of.
type Family uint8

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// PortProto is one L4 port of a service; two services may share a VIP only
// when their PortProtos are disjoint.
type PortProto struct {
	Port     uint16
	Protocol proxy.Protocol
}

// PortSpec is one port a standalone service exposes.
type PortSpec struct {
	Name       string         `json:"name,omitempty"`
	Port       uint16         `json:"port"`
	Protocol   proxy.Protocol `json:"protocol"`
	NodePort   uint16         `json:"nodePort,omitempty"`
	TargetPort uint16         `json:"targetPort,omitempty"` // 0: same as Port
}

// BackendSpec is a real server of a standalone service.
type BackendSpec struct {
	Addr netip.Addr `json:"address"`
	Port uint16     `json:"port,omitempty"` // 0: the port's TargetPort (or Port)
	// Weight is the share of new connections. 0 drains the backend: open
	// connections finish, no new ones arrive (config and REST default to 1).
	Weight uint32 `json:"weight"`
}

// PortFor is the port b listens on for p: its own port, else the port's
// target port, else the port itself. The dataplane and the health checks
// both resolve backends this way.
func (b BackendSpec) PortFor(p PortSpec) uint16 {
	switch {
	case b.Port != 0:
		return b.Port
	case p.TargetPort != 0:
		return p.TargetPort
	}
	return p.Port
}

// HealthCheck is an active check run against every backend (issue: health checks).
type HealthCheck struct {
	Type     string        `json:"type"` // "tcp", "http", "https"
	Path     string        `json:"path,omitempty"`
	Host     string        `json:"host,omitempty"`
	Expect   int           `json:"expectStatus,omitempty"`
	Interval time.Duration `json:"interval"`
	Timeout  time.Duration `json:"timeout"`
	Rise     int           `json:"rise"`
	Fall     int           `json:"fall"`
	Port     uint16        `json:"port,omitempty"` // 0: the backend's port
}

// HealthTarget is one backend of one service and the check to run against
// it, on the port the dataplane sends to.
type HealthTarget struct {
	Service string
	Backend netip.AddrPort
	Check   HealthCheck
}

// HealthTargets lists what s's check probes: each backend once per distinct
// port it serves on (BackendSpec.PortFor); none when s has no check.
func (s *ServiceSpec) HealthTargets() []HealthTarget {
	if s.Health == nil {
		return nil
	}
	var out []HealthTarget
	seen := map[netip.AddrPort]bool{}
	for _, p := range s.PortsServed() {
		for _, b := range s.Backends {
			ap := netip.AddrPortFrom(b.Addr, b.PortFor(p))
			if !seen[ap] {
				seen[ap] = true
				out = append(out, HealthTarget{Service: s.Name, Backend: ap, Check: *s.Health})
			}
		}
	}
	return out
}

// PortsServed is s.Ports, or for a firewall-mark service one zero port:
// its backends at their own ports (BackendSpec.PortFor gives the backend's
// port; 0 is the packet's own destination port).
func (s *ServiceSpec) PortsServed() []PortSpec {
	if s.FWMark != 0 {
		return []PortSpec{{}}
	}
	return s.Ports
}

// ServiceSpec is a service declared by hand (standalone mode): what the
// config file's services entries and the REST API's bodies parse into.
type ServiceSpec struct {
	Name string `json:"name"`
	// VIPs requested explicitly (at most one per family); empty: allocate.
	VIPs []netip.Addr `json:"vips,omitempty"`
	// Families to allocate for when VIPs is empty; empty means IPv4 only.
	Families []Family `json:"families,omitempty"`
	// FWMark, non-zero, makes this a firewall-mark service (IPVS only):
	// no VIPs, families, pool, sharing key or ports; the packets the
	// operator's firewall rules marked, to Backends at their own ports
	// (port 0: the packet's destination port).
	FWMark     uint32          `json:"fwmark,omitempty"`
	Pool       string          `json:"pool,omitempty"`
	SharingKey string          `json:"sharingKey,omitempty"`
	Ports      []PortSpec      `json:"ports"`
	Backends   []BackendSpec   `json:"backends"`
	Scheduler  proxy.Scheduler `json:"scheduler"`
	Affinity   time.Duration   `json:"affinityTimeout,omitempty"` // ClientIP affinity; 0 = none
	Method     proxy.Method    `json:"method"`
	Health     *HealthCheck    `json:"healthCheck,omitempty"`
}

// Request returns what the allocator needs to know about the service.
func (s *ServiceSpec) Request() Request {
	r := Request{Pool: s.Pool, SharingKey: s.SharingKey}
	for _, p := range s.Ports {
		r.Ports = append(r.Ports, PortProto{Port: p.Port, Protocol: p.Protocol})
	}
	return r
}

// Request is what the allocator considers when handing out or accepting an IP.
type Request struct {
	// Pool restricts the choice to one pool ("" = any auto-assign pool, or
	// for a requested IP, whichever pool contains it).
	Pool string
	// SharingKey: services with the same non-empty key and disjoint ports
	// may share one IP.
	SharingKey string
	Ports      []PortProto
	// Who asks, matched against pools' ServiceAllocation: a Kubernetes
	// Service's namespace, its labels and its namespace's labels (all
	// empty for standalone services, which have none).
	Namespace       string
	Labels          map[string]string
	NamespaceLabels map[string]string
}

// Origin says who declared a pool or service, so a reader can tell what a
// REST write may change (a config file's items are replaced on reload and
// refused to REST writes; Kubernetes' objects are changed with kubectl).
type Origin string

const (
	OriginConfig     Origin = "config"     // the config file
	OriginAPI        Origin = "api"        // the REST API
	OriginKubernetes Origin = "kubernetes" // an IPPool or Service object
)

// PoolStatus is a pool with its usage.
type PoolStatus struct {
	Pool
	Size   uint64 `json:"size"` // capped at MaxUint64 for huge IPv6 pools
	Used   int    `json:"used"`
	Origin Origin `json:"origin"`
}

// ServiceStatus is a service with what edgelb made of it.
type ServiceStatus struct {
	Spec ServiceSpec  `json:"spec"`
	VIPs []netip.Addr `json:"assigned"`
	// Pending explains why a service has no VIP yet ("" when assigned).
	Pending string `json:"pending,omitempty"`
	// Failed is why the dataplane refused this service at its last apply
	// ("" when programmed): the other services are programmed regardless.
	Failed string `json:"failed,omitempty"`
	Origin Origin `json:"origin"`
}

// Manager is the one writer's API: the REST API, config reload and the
// Kubernetes controller all change pools and services through it and only
// through it. Errors: *FieldError (bad input), ErrNotFound, *ConflictError.
type Manager interface {
	Pools(ctx context.Context) ([]PoolStatus, error)
	Pool(ctx context.Context, name string) (PoolStatus, error)
	// CreatePool refuses a name in use or a range overlapping another pool.
	CreatePool(ctx context.Context, p Pool) (PoolStatus, error)
	// UpdatePool refuses overlaps and dropping an address that is assigned.
	UpdatePool(ctx context.Context, p Pool) (PoolStatus, error)
	// DeletePool refuses while any address of the pool is assigned.
	DeletePool(ctx context.Context, name string) error

	Services(ctx context.Context) ([]ServiceStatus, error)
	Service(ctx context.Context, name string) (ServiceStatus, error)
	// PutService creates or replaces a standalone service; created reports which.
	PutService(ctx context.Context, s ServiceSpec) (st ServiceStatus, created bool, err error)
	DeleteService(ctx context.Context, name string) error
}
