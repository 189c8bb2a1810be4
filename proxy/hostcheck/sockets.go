package hostcheck

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/proxy"
)

// Kernel socket states as /proc/net/{tcp,udp}* print them (include/net/tcp_states.h).
const (
	StateEstablished uint8 = 0x01
	// StateClose is how an unconnected (bound, "listening") UDP socket shows.
	StateClose  uint8 = 0x07
	StateListen uint8 = 0x0A
)

// Socket is one line of /proc/net/tcp, tcp6, udp or udp6.
type Socket struct {
	Protocol proxy.Protocol
	Local    netip.AddrPort
	Remote   netip.AddrPort
	State    uint8
	UID      uint32
	Inode    uint64
}

// Listening reports whether the socket accepts traffic addressed to its
// local port from anyone: a TCP listener or an unconnected bound UDP socket.
func (s Socket) Listening() bool {
	if s.Protocol == proxy.UDP {
		return s.State == StateClose && s.Remote.Port() == 0
	}
	return s.State == StateListen
}

// Connected reports an established connection (TCP ESTABLISHED, or a
// connected UDP socket, which the kernel also shows as state 01).
func (s Socket) Connected() bool { return s.State == StateEstablished }

// maxSocketLines bounds what one file may hold, so a corrupt or hostile
// fixture cannot make the parser allocate without end.
const maxSocketLines = 1 << 20

// ParseSockets reads the table format of /proc/net/tcp and friends. The
// header line is skipped; any malformed line is an error naming the line.
func ParseSockets(r io.Reader, proto proxy.Protocol) ([]Socket, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	var out []Socket
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "sl ") || text == "sl" {
			continue
		}
		if line > maxSocketLines {
			return nil, fmt.Errorf("socket table: more than %d lines", maxSocketLines)
		}
		s, err := parseSocketLine(text, proto)
		if err != nil {
			return nil, fmt.Errorf("socket table line %d: %w", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("socket table: %w", err)
	}
	return out, nil
}

func parseSocketLine(text string, proto proxy.Protocol) (Socket, error) {
	f := strings.Fields(text)
	// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
	if len(f) < 10 {
		return Socket{}, fmt.Errorf("want at least 10 fields, got %d in %q", len(f), text)
	}
	if !strings.HasSuffix(f[0], ":") {
		return Socket{}, fmt.Errorf("slot %q does not end in ':'", f[0])
	}
	local, err := parseHexAddrPort(f[1])
	if err != nil {
		return Socket{}, fmt.Errorf("local address: %w", err)
	}
	remote, err := parseHexAddrPort(f[2])
	if err != nil {
		return Socket{}, fmt.Errorf("remote address: %w", err)
	}
	st, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil {
		return Socket{}, fmt.Errorf("state %q: not a hex byte", f[3])
	}
	uid, err := strconv.ParseUint(f[7], 10, 32)
	if err != nil {
		return Socket{}, fmt.Errorf("uid %q: not a number", f[7])
	}
	inode, err := strconv.ParseUint(f[9], 10, 64)
	if err != nil {
		return Socket{}, fmt.Errorf("inode %q: not a number", f[9])
	}
	return Socket{Protocol: proto, Local: local, Remote: remote, State: uint8(st), UID: uint32(uid), Inode: inode}, nil
}

// parseHexAddrPort decodes "0100007F:0016". The kernel prints the address
// as 32-bit words in host byte order (%08X of each word as stored), and the
// port already converted to host order.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%q: want ADDR:PORT in hex", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: port is not 16-bit hex", s)
	}
	if len(a) != 8 && len(a) != 32 {
		return netip.AddrPort{}, fmt.Errorf("%q: address must have 8 or 32 hex digits", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: address is not hex", s)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}
