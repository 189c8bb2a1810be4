package config

import (
	"fmt"

	"github.com/edgelb/edgelb/lb"
)

// OwnAddrs are the gateway's own addresses the file itself names: where
// the API, memberlist, BGP and conntrackd's sync bind, the floating source
// addresses and the node addresses. They are never a pool address, a VIP
// or a backend; the file's pools and services are judged against them
// (Validate), and the daemon adds its interfaces' addresses to them for
// the engine (issue 36).
func (c *Config) OwnAddrs() *lb.OwnAddrs {
	o := lb.NewOwnAddrs()
	o.Add(c.API.Listen.Addr(), "api.listen")
	if l2 := c.Announce.L2; l2 != nil {
		for i, a := range l2.SourceAddresses {
			o.Add(a, index("announce.l2.sourceAddresses", i))
		}
		if m := l2.Members; m != nil {
			o.Add(m.Bind.Addr(), "announce.l2.members.bind")
			o.Add(m.Advertise.Addr(), "announce.l2.members.advertise")
		}
	}
	if b := c.Announce.BGP; b != nil {
		o.Add(b.RouterID, "announce.bgp.routerID")
		for i, p := range b.Peers {
			o.Add(p.SourceAddress, fmt.Sprintf("announce.bgp.peers[%d].sourceAddress", i))
		}
	}
	if ct := c.StateSync.Conntrackd; ct != nil {
		o.Add(ct.Address, "stateSync.conntrackd.address")
	}
	for i, a := range c.Dataplane.NodeAddresses {
		o.Add(a, index("dataplane.nodeAddresses", i))
	}
	return o
}
