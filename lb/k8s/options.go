package k8s

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
	"github.com/edgelb/edgelb/proxy"
)

// BackendMode is where traffic for a Service goes.
type BackendMode string

const (
	// BackendEndpoints sends traffic to pod IPs from EndpointSlices.
	BackendEndpoints BackendMode = "endpoints"
	// BackendNodePort sends traffic to node addresses and the Service's nodePort.
	BackendNodePort BackendMode = "nodeport"
)

// DefaultClass is the loadBalancerClass edgelb serves unless told otherwise.
const DefaultClass = "edgelb.io/lb"

// Options configure a Controller. Zero values get defaults (see defaults).
type Options struct {
	// Class is the spec.loadBalancerClass this controller serves.
	Class string
	// HandleClassless also serves LoadBalancer Services without a class.
	HandleClassless bool
	// NodeName is this gateway's Node: externalTrafficPolicy Local keeps
	// endpoints on it, its zone picks topology hints, its addresses carry
	// node ports when NodeAddrs is empty. Default: the host name.
	NodeName string
	// NodeAddrs are the gateway's own addresses node ports listen on; empty:
	// the InternalIP/ExternalIP addresses of Node NodeName.
	NodeAddrs []netip.Addr
	// OwnAddrs are the gateway's own addresses at start (its interfaces'
	// and what its config binds to; SetOwnAddrs replaces them): an IPPool
	// holding one is rejected and a Service requesting one refused (issue
	// 36). nil: none known.
	OwnAddrs *lb.OwnAddrs
	// Announcers is what this gateway announces with (its config's
	// announce section): an IPPool whose announce selection names an
	// announcer, BGP peer or L2 interfaces it cannot serve is reported on
	// this gateway (poolannounce.go). nil: not checked.
	Announcers *lb.Announcers
	// BackendMode: endpoints (pod IPs) or nodeport (node addresses + nodePort).
	BackendMode BackendMode
	// NodePortsOnLoadBalancers also exposes a LoadBalancer Service's node
	// ports on the gateway's addresses (type NodePort Services always are).
	NodePortsOnLoadBalancers bool
	// Scheduler and Method are used for every Kubernetes service.
	Scheduler proxy.Scheduler
	Method    proxy.Method

	// Leader election: only the Lease holder assigns IPs.
	LeaseNamespace string
	LeaseName      string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	// KeepLeaseOnStop leaves the Lease held when Run returns (as a crash
	// would); false releases it so another instance takes over at once.
	KeepLeaseOnStop bool

	// NewAllocator builds the allocator of each leadership term (default:
	// lb's allocator, picking in AllocationOrder).
	NewAllocator NewAllocatorFunc
	// AllocationOrder is how lb's allocator picks inside an IPPool (zero:
	// lb.LowestFree, MetalLB's order; lb.Rotate reuses released addresses
	// last). Config key allocation.order.
	AllocationOrder lb.AllocOrder

	// Audit receives what the leader acts on: addresses assigned to and
	// released from Services, IPPools taken into use, changed or dropped
	// (nil: not recorded).
	Audit audit.Recorder

	// Registerer receives the controller's metrics (nil: not registered).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Class == "" {
		o.Class = DefaultClass
	}
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("node name: %w", err)
		}
		o.NodeName = h
	}
	switch o.BackendMode {
	case "":
		o.BackendMode = BackendEndpoints
	case BackendEndpoints, BackendNodePort:
	default:
		return o, fmt.Errorf("backendMode %q: want %q or %q", o.BackendMode, BackendEndpoints, BackendNodePort)
	}
	if o.Scheduler == "" {
		o.Scheduler = proxy.DefaultScheduler
	}
	if o.Method == "" {
		o.Method = proxy.NAT
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = "edgelb-system"
	}
	if o.LeaseName == "" {
		o.LeaseName = "edgelb"
	}
	if o.Identity == "" {
		h, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = o.LeaseDuration * 2 / 3
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = o.LeaseDuration / 7
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return o, fmt.Errorf("renewDeadline %s must be shorter than leaseDuration %s", o.RenewDeadline, o.LeaseDuration)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
