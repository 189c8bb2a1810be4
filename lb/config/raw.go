package config

import "github.com/edgelb/edgelb/lb"

// The raw structs mirror the YAML exactly; their json tags are the field
// names users write. They hold strings for everything that needs parsing
// (addresses, durations, enums) so that a bad value is reported with its
// path by our own code, and pointers where "absent" differs from "zero".
// Pools, services and BGP peers are lb's input schema (lb/spec.go), the
// same structs REST bodies, IPPool specs and `edgelb migrate` use. Nothing
// outside this package sees the rest: Parse returns typed values.

type rawConfig struct {
	Pools      []lb.PoolInput    `json:"pools"`
	Services   []lb.ServiceInput `json:"services"`
	Announce   rawAnnounce       `json:"announce"`
	Dataplane  rawDataplane      `json:"dataplane"`
	API        rawAPI            `json:"api"`
	Kubernetes rawKubernetes     `json:"kubernetes"`
	State      rawState          `json:"state"`
	Health     rawHealth         `json:"health"`
	Log        rawLog            `json:"log"`
	StateSync  rawStateSync      `json:"stateSync"`
	Allocation rawAllocation     `json:"allocation"`
}

type rawAllocation struct {
	Order string `json:"order"`
}

type rawAnnounce struct {
	L2                 *rawL2  `json:"l2"`
	BGP                *rawBGP `json:"bgp"`
	WithdrawOnShutdown *bool   `json:"withdrawOnShutdown"`
}

type rawL2 struct {
	Interface       string      `json:"interface"`
	Members         *rawMembers `json:"members"`
	SourceAddresses []string    `json:"sourceAddresses"`
	SourceInterface string      `json:"sourceInterface"`
}

type rawStateSync struct {
	Conntrackd *rawConntrackd `json:"conntrackd"`
	IPVS       *rawIPVSSync   `json:"ipvs"`
}

type rawConntrackd struct {
	Interface      string   `json:"interface"`
	Address        string   `json:"address"`
	Peer           string   `json:"peer"`
	Peers          []string `json:"peers"`
	MulticastGroup string   `json:"multicastGroup"`
	Port           int64    `json:"port"`
	Binary         string   `json:"binary"`
	Coalesce       duration `json:"coalesce"` // refused: the gate it set is gone
	CommitTimeout  duration `json:"commitTimeout"`
}

type rawMembers struct {
	Name          string   `json:"name"`
	BindAddress   string   `json:"bindAddress"`
	Advertise     string   `json:"advertiseAddress"`
	Port          int64    `json:"port"`
	Join          []string `json:"join"`
	ProbeInterval duration `json:"probeInterval"`
	ProbeTimeout  duration `json:"probeTimeout"`
	SuspicionMult *int64   `json:"suspicionMult"`
	SecretFile    string   `json:"secretFile"`
}

type rawBGP struct {
	LocalASN   int64          `json:"localASN"`
	RouterID   string         `json:"routerID"`
	ListenPort int64          `json:"listenPort"`
	Peers      []lb.PeerInput `json:"peers"`
}

type rawDataplane struct {
	Mode                  string   `json:"mode"`
	DrainTimeout          duration `json:"drainTimeout"`
	ResyncInterval        duration `json:"resyncInterval"`
	SNAT                  *bool    `json:"snat"`
	NodeAddresses         []string `json:"nodeAddresses"`
	NodePortRange         string   `json:"nodePortRange"`
	AllowEphemeralOverlap bool     `json:"allowEphemeralOverlap"`
	ConntrackPeak         uint64   `json:"conntrackPeak"`
	IPVSDevice            string   `json:"ipvsDevice"`
	SetSysctls            *bool    `json:"setSysctls"`
}

type rawAPI struct {
	Listen         string        `json:"listen"`
	TokenFile      string        `json:"tokenFile"`
	Tokens         []rawAPIToken `json:"tokens"`
	AnonymousReads bool          `json:"anonymousReads"`
	TLS            *rawTLS       `json:"tls"`
	LiveFlows      string        `json:"liveFlows"`
}

type rawAPIToken struct {
	Name string `json:"name"`
	File string `json:"file"`
	Role string `json:"role"`
}

type rawTLS struct {
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	ClientCA string `json:"clientCA"`
}

type rawKubernetes struct {
	Enabled           bool   `json:"enabled"`
	Kubeconfig        string `json:"kubeconfig"`
	LoadBalancerClass string `json:"loadBalancerClass"`
	HandleClassless   bool   `json:"handleClassless"`
	LeaseName         string `json:"leaseName"`
	LeaseNamespace    string `json:"leaseNamespace"`
	BackendMode       string `json:"backendMode"`
	NodeName          string `json:"nodeName"`
	Scheduler         string `json:"scheduler"`
	Method            string `json:"method"`
	NodePortsOnLBs    bool   `json:"nodePortsOnLoadBalancers"`

	NodeHealthCheck *rawNodeHealthCheck `json:"nodeHealthCheck"`
}

// rawNodeHealthCheck is a TCP connect check: no type, path or port to set.
type rawNodeHealthCheck struct {
	Interval duration `json:"interval"`
	Timeout  duration `json:"timeout"`
	Rise     *int64   `json:"rise"`
	Fall     *int64   `json:"fall"`
}

type rawState struct {
	Dir       string     `json:"dir"`
	Type      string     `json:"type"`
	Endpoints []string   `json:"endpoints"`
	TLS       rawEtcdTLS `json:"tls"`
	Prefix    string     `json:"prefix"`
	Gateway   string     `json:"gateway"`
}

type rawHealth struct {
	AllDown     string `json:"allDown"`
	MaxInFlight int64  `json:"maxInFlight"`
}

type rawLog struct {
	Level  string `json:"level"`
	Format string `json:"format"`
}

// duration is a Go duration string ("500ms", "3h").
type duration = string
