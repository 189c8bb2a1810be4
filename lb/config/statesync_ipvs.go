package config

import (
	"fmt"
	"net/netip"
)

// IPVSSync runs the kernel's IPVS connection sync daemon (ip_vs_sync) with
// the IPVS dataplane: a master that multicasts the connections this gateway
// forwards and a backup that receives the other gateways', both at once, on
// one interface. Every gateway of a sync group uses the same SyncID, group
// and port.
type IPVSSync struct {
	// Interface carries the sync multicast (a dedicated link is best).
	Interface string
	// SyncID tags this group's messages (0-255); the backup ignores other ids.
	SyncID uint8
	// MulticastGroup, Port, TTL: zero = the kernel's defaults 224.0.0.81,
	// 8848, 1.
	MulticastGroup netip.Addr
	Port           uint16
	TTL            uint8
}

type rawIPVSSync struct {
	Interface      string `json:"interface"`
	SyncID         *int64 `json:"syncID"`
	MulticastGroup string `json:"multicastGroup"`
	Port           int64  `json:"port"`
	TTL            int64  `json:"ttl"`
}

func convertIPVSSync(r *rawIPVSSync, c *collector) *IPVSSync {
	if r == nil {
		return nil
	}
	const path = "stateSync.ipvs"
	s := &IPVSSync{Interface: r.Interface}
	if r.SyncID == nil {
		c.add(path+".syncID", "", "required: the same 0-255 on every gateway of the sync group")
	} else {
		s.SyncID = uint8(intIn(c, path+".syncID", *r.SyncID, 0, 255))
	}
	if r.MulticastGroup != "" {
		if a, ok := parseAddr(c, path+".multicastGroup", r.MulticastGroup); ok {
			s.MulticastGroup = a
		}
	}
	s.Port = port16(c, path+".port", r.Port, 0)
	if r.TTL != 0 {
		s.TTL = uint8(intIn(c, path+".ttl", r.TTL, 1, 255))
	}
	return s
}

func (c *Config) validateIPVSSync(col *collector) {
	s := c.StateSync.IPVS
	if s == nil {
		return
	}
	const path = "stateSync.ipvs"
	if err := checkIfName(s.Interface); err != nil {
		col.addErr(path+".interface", s.Interface, err)
	}
	if g := s.MulticastGroup; g.IsValid() && (!g.IsMulticast() || g.Is4In6()) {
		col.add(path+".multicastGroup", g.String(), "want a multicast group (224.0.0.0/4 or ff00::/8), like 224.0.0.81")
	}
	if c.Dataplane.Mode != ModeIPVS {
		col.addErr(path, "", fmt.Errorf("syncs the IPVS dataplane's connections; dataplane.mode is %q (set ipvs; nftables uses stateSync.conntrackd): %w",
			c.Dataplane.Mode, ErrStateSync))
	}
}
