// Package syncd starts, stops and reads back the kernel's IPVS connection
// synchronisation daemon (the "LVS sync daemon": `ipvsadm --start-daemon`,
// keepalived's lvs_sync_daemon) over generic netlink, family "IPVS",
// commands IPVS_CMD_NEW_DAEMON / IPVS_CMD_DEL_DAEMON / IPVS_CMD_GET_DAEMON
// (include/uapi/linux/ip_vs.h). moby/ipvs does not expose these commands, so
// this package speaks the protocol itself with github.com/mdlayher/netlink.
//
// A master sends the connections this node's IPVS creates to a multicast
// group on one interface; a backup receives them and creates the same
// connection entries, so that when a VIP moves here the packets of an open
// connection find their real server. One namespace may run both at once
// (every gateway sends its own connections and receives the others').
package syncd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// Generic netlink: the IPVS family's commands and attributes.
const (
	genlVersion = 1 // IPVS_GENL_VERSION

	cmdNewDaemon = 9  // IPVS_CMD_NEW_DAEMON
	cmdDelDaemon = 10 // IPVS_CMD_DEL_DAEMON
	cmdGetDaemon = 11 // IPVS_CMD_GET_DAEMON

	cmdAttrDaemon = 3 // IPVS_CMD_ATTR_DAEMON (nested)

	attrState       = 1 // IPVS_DAEMON_ATTR_STATE u32
	attrMcastIfn    = 2 // IPVS_DAEMON_ATTR_MCAST_IFN NUL-terminated string
	attrSyncID      = 3 // IPVS_DAEMON_ATTR_SYNC_ID u32 (the kernel keeps a u8)
	attrSyncMaxLen  = 4 // IPVS_DAEMON_ATTR_SYNC_MAXLEN u16 (UDP payload size)
	attrMcastGroup  = 5 // IPVS_DAEMON_ATTR_MCAST_GROUP in_addr (network order)
	attrMcastGroup6 = 6 // IPVS_DAEMON_ATTR_MCAST_GROUP6 in6_addr
	attrMcastPort   = 7 // IPVS_DAEMON_ATTR_MCAST_PORT u16 (host order)
	attrMcastTTL    = 8 // IPVS_DAEMON_ATTR_MCAST_TTL u8

	// ifNameMax is IP_VS_IFNAME_MAXLEN less the NUL the kernel's policy
	// (NLA_NUL_STRING, len 15) counts on.
	ifNameMax = 15
)

// Role is a sync daemon's state: IP_VS_STATE_MASTER or IP_VS_STATE_BACKUP.
type Role uint32

const (
	Master Role = 1
	Backup Role = 2
)

func (r Role) String() string {
	switch r {
	case Master:
		return "master"
	case Backup:
		return "backup"
	}
	return fmt.Sprintf("role(%d)", uint32(r))
}

// Kernel defaults, applied by start_sync_thread to a zero field.
var (
	DefaultGroup = netip.AddrFrom4([4]byte{224, 0, 0, 81}) // IP_VS_SYNC_GROUP
)

const (
	DefaultPort = 8848 // IP_VS_SYNC_PORT
	DefaultTTL  = 1
)

// Params configure one daemon. Zero Group, Port, TTL and MaxLen leave the
// kernel's defaults (224.0.0.81, 8848, 1, from the interface's MTU).
type Params struct {
	Interface string     // multicast interface (required)
	SyncID    uint8      // 0 on a backup: accept every sync id
	Group     netip.Addr // multicast group, IPv4 or IPv6
	Port      uint16
	TTL       uint8
	MaxLen    uint16 // UDP payload size of a sync message
}

// Daemon is one running daemon as the kernel reports it.
type Daemon struct {
	Role Role
	Params
}

// ErrInvalid is wrapped by Params.Validate's errors.
var ErrInvalid = errors.New("invalid ipvs sync daemon parameters")

// ErrMalformed is wrapped by the reply parser's errors.
var ErrMalformed = errors.New("malformed ipvs daemon reply")

// Validate checks what the kernel would refuse, before a message is built.
func (p Params) Validate() error {
	if p.Interface == "" || len(p.Interface) > ifNameMax {
		return fmt.Errorf("%w: interface %q: want 1 to %d bytes", ErrInvalid, p.Interface, ifNameMax)
	}
	for i := 0; i < len(p.Interface); i++ {
		if c := p.Interface[i]; c == 0 || c == '/' || c == ' ' {
			return fmt.Errorf("%w: interface %q: contains %q", ErrInvalid, p.Interface, c)
		}
	}
	if p.Group.IsValid() && !p.Group.IsMulticast() {
		return fmt.Errorf("%w: group %s: not a multicast address", ErrInvalid, p.Group)
	}
	if p.Group.Is4In6() {
		return fmt.Errorf("%w: group %s: an IPv4-mapped IPv6 address; write it as IPv4", ErrInvalid, p.Group)
	}
	return nil
}

// genlHeader is the generic netlink header: command, version, reserved.
func genlHeader(cmd uint8) []byte { return []byte{cmd, genlVersion, 0, 0} }

// encodeStart is the payload of IPVS_CMD_NEW_DAEMON for role with p.
// Optional attributes are sent only when set, as ipvsadm does, so a kernel
// older than 4.3 (no group/port/ttl) still accepts a request using defaults.
func encodeStart(role Role, p Params) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return encodeDaemon(cmdNewDaemon, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrState, uint32(role))
		ae.String(attrMcastIfn, p.Interface)
		ae.Uint32(attrSyncID, uint32(p.SyncID))
		if p.MaxLen != 0 {
			ae.Uint16(attrSyncMaxLen, p.MaxLen)
		}
		if p.Group.Is4() {
			a := p.Group.As4()
			ae.Bytes(attrMcastGroup, a[:])
		} else if p.Group.Is6() {
			a := p.Group.As16()
			ae.Bytes(attrMcastGroup6, a[:])
		}
		if p.Port != 0 {
			ae.Uint16(attrMcastPort, p.Port)
		}
		if p.TTL != 0 {
			ae.Uint8(attrMcastTTL, p.TTL)
		}
	})
}

// encodeStop is the payload of IPVS_CMD_DEL_DAEMON: only the state counts.
func encodeStop(role Role) ([]byte, error) {
	return encodeDaemon(cmdDelDaemon, func(ae *netlink.AttributeEncoder) {
		ae.Uint32(attrState, uint32(role))
	})
}

// encodeList is the payload of the IPVS_CMD_GET_DAEMON dump request.
func encodeList() []byte { return genlHeader(cmdGetDaemon) }

func encodeDaemon(cmd uint8, fill func(*netlink.AttributeEncoder)) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.NativeEndian
	ae.Nested(cmdAttrDaemon, func(nae *netlink.AttributeEncoder) error {
		fill(nae)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("ipvs sync daemon: encode: %w", err)
	}
	return append(genlHeader(cmd), b...), nil
}

// parseDaemon parses one message of the GET_DAEMON dump (generic netlink
// header included). The kernel answers with IPVS_CMD_NEW_DAEMON messages, one
// per running role, each with a nested IPVS_CMD_ATTR_DAEMON.
func parseDaemon(b []byte) (Daemon, error) {
	var d Daemon
	if len(b) < 4 {
		return d, fmt.Errorf("%w: %d bytes, shorter than the generic netlink header", ErrMalformed, len(b))
	}
	ad, err := netlink.NewAttributeDecoder(b[4:])
	if err != nil {
		return d, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	ad.ByteOrder = binary.NativeEndian
	seen := false
	for ad.Next() {
		if ad.Type() != cmdAttrDaemon {
			continue
		}
		seen = true
		ad.Nested(func(nad *netlink.AttributeDecoder) error {
			return parseDaemonAttrs(nad, &d)
		})
	}
	if err := ad.Err(); err != nil {
		return Daemon{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !seen {
		return Daemon{}, fmt.Errorf("%w: no IPVS_CMD_ATTR_DAEMON attribute", ErrMalformed)
	}
	if d.Role != Master && d.Role != Backup {
		return Daemon{}, fmt.Errorf("%w: state %d is neither master (1) nor backup (2)", ErrMalformed, uint32(d.Role))
	}
	return d, nil
}

func parseDaemonAttrs(nad *netlink.AttributeDecoder, d *Daemon) error {
	for nad.Next() {
		switch nad.Type() {
		case attrState:
			d.Role = Role(nad.Uint32())
		case attrMcastIfn:
			d.Interface = nad.String()
		case attrSyncID:
			// The kernel stores a u8 and reports it in a u32.
			v := nad.Uint32()
			if v > 255 {
				return fmt.Errorf("sync id %d out of range", v)
			}
			d.SyncID = uint8(v)
		case attrSyncMaxLen:
			d.MaxLen = nad.Uint16()
		case attrMcastGroup:
			b := nad.Bytes()
			if len(b) != 4 {
				return fmt.Errorf("group: %d bytes, want 4", len(b))
			}
			d.Group = netip.AddrFrom4([4]byte(b))
		case attrMcastGroup6:
			b := nad.Bytes()
			if len(b) != 16 {
				return fmt.Errorf("group6: %d bytes, want 16", len(b))
			}
			d.Group = netip.AddrFrom16([16]byte(b))
		case attrMcastPort:
			d.Port = nad.Uint16()
		case attrMcastTTL:
			d.TTL = nad.Uint8()
		}
	}
	return nil
}
