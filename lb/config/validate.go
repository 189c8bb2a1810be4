package config

import (
	"fmt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy/nft"
)

// Validate checks a Config's typed values and their relations (overlapping
// pools, VIPs outside pools, duplicate VIP:port/proto, node ports outside
// the range, DR with port mapping...). Parse and Load call it; call it again
// after changing a Config in code. Field paths use file indexes
// (services[2] is Services[2]). It returns *Errors or nil.
//
// Pools and services are judged by lb's one validator (lb.CheckPool,
// lb.CheckService, lb.CheckPools, lb.CheckServices), as REST bodies and
// IPPool objects are, against the own addresses the file names (OwnAddrs);
// what is here is the file's own: its sections, and that a service without
// a VIP has a pool to draw from.
func (c *Config) Validate() error {
	var col collector
	c.validate(&col)
	return col.err("")
}

func (c *Config) validate(col *collector) {
	c.validatePools(col)
	c.validateServices(col)
	c.validateAnnounce(col)
	c.validateDataplane(col)
	c.validateAPI(col)
	c.validateKubernetes(col)
	c.validateStateSync(col)
	c.validateState(col)
	switch c.Health.AllDown {
	case AllDownKeep, AllDownWithdraw:
	default:
		col.add("health.allDown", string(c.Health.AllDown), "want keep or withdraw")
	}
	if c.Health.MaxInFlight < 1 {
		col.add("health.maxInFlight", fmt.Sprint(c.Health.MaxInFlight), "must be at least 1")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		col.add("log.format", c.Log.Format, "want text or json")
	}
}

func (c *Config) validatePools(col *collector) {
	own := c.OwnAddrs()
	for i := range c.Pools {
		p := &c.Pools[i]
		path := index("pools", i)
		lb.CheckPool(&col.Collector, path, p, own)
		// Standalone: only serviceAllocation.priority applies.
		if err := lb.ValidateStandaloneAllocation(p.Allocation); err != nil {
			if fe, ok := err.(*lb.FieldError); ok {
				col.addErr(path+"."+fe.Field, fe.Value, fe.Err)
			} else {
				col.addErr(path+".serviceAllocation", "", err)
			}
		}
	}
	lb.CheckPools(&col.Collector, "pools", c.Pools)
	an := c.Announcers()
	for i := range c.Pools {
		lb.CheckPoolAnnounce(&col.Collector, index("pools", i), &c.Pools[i], an)
	}
}

// Announcers is what the announce section runs, for judging pools'
// announce: selections (here, and by the engine for REST writes).
func (c *Config) Announcers() lb.Announcers {
	var an lb.Announcers
	if l2 := c.Announce.L2; l2 != nil {
		an.L2Interface = l2.Interface
	}
	if b := c.Announce.BGP; b != nil {
		an.BGP = true
		for _, p := range b.Peers {
			an.BGPPeers = append(an.BGPPeers, p.Name) // the address when none is written
		}
	}
	return an
}

// singleVIP reports whether service i wrote its VIP as vip: (its errors
// then name "vip").
func (c *Config) singleVIP(i int) bool { return i < len(c.wroteVIP) && c.wroteVIP[i] }

func (c *Config) validateServices(col *collector) {
	if c.Kubernetes.Enabled {
		if len(c.Services) > 0 {
			col.add("services", "", "not allowed with kubernetes.enabled: services come from the API server")
		}
		if len(c.Pools) > 0 {
			col.add("pools", "", "not allowed with kubernetes.enabled: pools are IPPool objects (edgelb.io/v1alpha1; kubectl apply them)")
		}
	}
	o := lb.ValidateOptions{NodePortRange: lb.PortRange{First: c.Dataplane.NodePortRange.First, Last: c.Dataplane.NodePortRange.Last}, Pools: c.Pools,
		Own: c.OwnAddrs()}
	if o.Pools == nil {
		o.Pools = []lb.Pool{}
	}
	if c.Dataplane.Mode == ModeNFTables {
		// The dataplane is known: judge by its own rule, as the engine
		// does (with mode auto the daemon knows only at start: lb/preflight):
		// a method or fwmark nftables cannot do is refused by the probe.
		o.Dataplane = nft.Check
	}
	for i := range c.Services {
		s := &c.Services[i]
		path := index("services", i)
		o.SingleVIP = c.singleVIP(i)
		lb.CheckService(&col.Collector, path, s, o)
		c.checkAddressSource(col, path, s)
	}
	lb.CheckServices(&col.Collector, "services", c.Services, c.singleVIP)
}

// checkAddressSource: a file is complete, so a service without a VIP must
// have a pool of each family it wants to draw from (REST and the engine
// leave such a service pending instead).
func (c *Config) checkAddressSource(col *collector, path string, s *lb.ServiceSpec) {
	if len(s.VIPs) > 0 || s.FWMark != 0 || c.Kubernetes.Enabled || col.failed(path+".pool") || col.failed(path+".families") {
		return
	}
	want := s.Families
	if len(want) == 0 {
		want = []lb.Family{lb.IPv4}
	}
	for _, fam := range want {
		if s.Pool != "" {
			if p := c.PoolByName(s.Pool); p != nil && !hasFamily(p, fam) {
				col.add(path+".pool", s.Pool, "pool has no %s addresses to allocate from", fam)
			}
			continue
		}
		auto := false
		for j := range c.Pools {
			if c.Pools[j].AutoAssign && hasFamily(&c.Pools[j], fam) {
				auto = true
			}
		}
		if !auto {
			col.add(path, s.Name, "no vip, no pool, and no autoAssign pool has %s addresses to allocate from", fam)
		}
	}
}

func hasFamily(p *lb.Pool, f lb.Family) bool {
	for _, r := range p.Ranges {
		if r.Is4() == (f == lb.IPv4) {
			return true
		}
	}
	return false
}
