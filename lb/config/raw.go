package config

// The raw structs mirror the YAML exactly; their json tags are the field
// names users write. They hold strings for everything that needs parsing
// (addresses, durations, enums) so that a bad value is reported with its
// path by our own code, and pointers where "absent" differs from "zero".
// Nothing outside this package sees them: Parse returns typed values.

type rawConfig struct {
	Pools      []rawPool     `json:"pools"`
	Services   []rawService  `json:"services"`
	Announce   rawAnnounce   `json:"announce"`
	Dataplane  rawDataplane  `json:"dataplane"`
	API        rawAPI        `json:"api"`
	Kubernetes rawKubernetes `json:"kubernetes"`
	State      rawState      `json:"state"`
	Health     rawHealth     `json:"health"`
	Log        rawLog        `json:"log"`
	StateSync  rawStateSync  `json:"stateSync"`
}

type rawPool struct {
	Name          string           `json:"name"`
	Addresses     []string         `json:"addresses"`
	AutoAssign    *bool            `json:"autoAssign"`
	AvoidBuggyIPs bool             `json:"avoidBuggyIPs"`
	Advertisement rawAdvertisement `json:"advertisement"`
	// ServiceAllocation: priority only in a file (standalone services have
	// no namespace or labels; lb.ValidateStandaloneAllocation says so).
	ServiceAllocation *rawServiceAllocation `json:"serviceAllocation"`
}

type rawAdvertisement struct {
	Communities       []string `json:"communities"`
	LargeCommunities  []string `json:"largeCommunities"`
	LocalPref         int64    `json:"localPref"`
	AggregationLength int      `json:"aggregationLength"`
}

type rawService struct {
	Name        string          `json:"name"`
	VIP         string          `json:"vip"`
	VIPs        []string        `json:"vips"`
	Families    []string        `json:"families"`
	Pool        string          `json:"pool"`
	SharingKey  string          `json:"sharingKey"`
	Ports       []rawPort       `json:"ports"`
	Backends    []rawBackend    `json:"backends"`
	Scheduler   string          `json:"scheduler"`
	Affinity    *rawAffinity    `json:"affinity"`
	Method      string          `json:"method"`
	HealthCheck *rawHealthCheck `json:"healthCheck"`
}

type rawPort struct {
	Name       string `json:"name"`
	Port       int64  `json:"port"`
	Protocol   string `json:"protocol"`
	NodePort   int64  `json:"nodePort"`
	TargetPort int64  `json:"targetPort"`
}

type rawBackend struct {
	Address string `json:"address"`
	Port    int64  `json:"port"`
	Weight  *int64 `json:"weight"`
}

type rawAffinity struct {
	Type    string   `json:"type"`
	Timeout duration `json:"timeout"`
}

type rawHealthCheck struct {
	Type         string   `json:"type"`
	URL          string   `json:"url"`
	Path         string   `json:"path"`
	Host         string   `json:"host"`
	Port         int64    `json:"port"`
	ExpectStatus int64    `json:"expectStatus"`
	Interval     duration `json:"interval"`
	Timeout      duration `json:"timeout"`
	Rise         *int64   `json:"rise"`
	Fall         *int64   `json:"fall"`
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
	Coalesce       duration `json:"coalesce"`
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
	LocalASN   int64     `json:"localASN"`
	RouterID   string    `json:"routerID"`
	ListenPort int64     `json:"listenPort"`
	Peers      []rawPeer `json:"peers"`
}

type rawPeer struct {
	Name            string   `json:"name"`
	Address         string   `json:"address"`
	ASN             int64    `json:"asn"`
	Port            int64    `json:"port"`
	SourceAddress   string   `json:"sourceAddress"`
	MultihopTTL     int64    `json:"multihopTTL"`
	Password        string   `json:"password"`
	PasswordFile    string   `json:"passwordFile"`
	HoldTime        duration `json:"holdTime"`
	Keepalive       duration `json:"keepalive"`
	Passive         bool     `json:"passive"`
	GracefulRestart bool     `json:"gracefulRestart"`
	BFD             *rawBFD  `json:"bfd"`
}

type rawBFD struct {
	Enabled          bool     `json:"enabled"`
	ReceiveInterval  duration `json:"receiveInterval"`
	TransmitInterval duration `json:"transmitInterval"`
	Multiplier       int64    `json:"multiplier"`
	Passive          bool     `json:"passive"`
}

type rawDataplane struct {
	Mode                  string   `json:"mode"`
	DrainTimeout          duration `json:"drainTimeout"`
	ResyncInterval        duration `json:"resyncInterval"`
	SNAT                  *bool    `json:"snat"`
	NodeAddresses         []string `json:"nodeAddresses"`
	NodePortRange         string   `json:"nodePortRange"`
	AllowEphemeralOverlap bool     `json:"allowEphemeralOverlap"`
	IPVSDevice            string   `json:"ipvsDevice"`
	SetSysctls            *bool    `json:"setSysctls"`
}

type rawAPI struct {
	Listen    string  `json:"listen"`
	TokenFile string  `json:"tokenFile"`
	TLS       *rawTLS `json:"tls"`
	LiveFlows string  `json:"liveFlows"`
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

// duration is a Go duration string ("500ms", "3h"); a separate type so the
// decoder can say "want a duration" when it meets a bare number.
type duration string
