package ipvs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/proxy"
)

// Conn is one entry of the IPVS connection table (/proc/net/ip_vs_conn).
type Conn struct {
	Protocol proxy.Protocol
	Client   netip.AddrPort
	Virtual  netip.AddrPort // the frontend the client addressed
	Dest     netip.AddrPort // the real server
	State    string         // IPVS's state name: ESTABLISHED, TIME_WAIT, ..., UDP, NONE
	Expires  uint32         // seconds until the entry expires
	// Template is a persistence (affinity) template, not a connection: its
	// client port is 0 and it pins the client to Dest.
	Template bool
}

// ParseConnTable parses /proc/net/ip_vs_conn. Lines it cannot read are
// reported in the error (the good ones are still returned), so one odd line
// never hides the table.
//
//	Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
//	TCP C0000202 9C40 CB007164 0050 C6336402 1F90 ESTABLISHED     899
//
// IPv6 entries print full colon-separated addresses instead of hex words.
func ParseConnTable(r io.Reader) ([]Conn, error) {
	var out []Conn
	var bad []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "Pro ") {
			continue
		}
		c, err := parseConnLine(text)
		if err != nil {
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("line %d: %v", line, err))
			}
			continue
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("ipvs: read connection table: %w", err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("ipvs: connection table: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

func parseConnLine(s string) (Conn, error) {
	f := strings.Fields(s)
	if len(f) < 9 {
		return Conn{}, fmt.Errorf("%d fields, want at least 9: %q", len(f), s)
	}
	var c Conn
	switch f[0] {
	case "TCP":
		c.Protocol = proxy.TCP
	case "UDP":
		c.Protocol = proxy.UDP
	default:
		return Conn{}, fmt.Errorf("protocol %q: want TCP or UDP", f[0])
	}
	var err error
	if c.Client, err = parseConnAddr(f[1], f[2]); err != nil {
		return Conn{}, fmt.Errorf("client: %w", err)
	}
	if c.Virtual, err = parseConnAddr(f[3], f[4]); err != nil {
		return Conn{}, fmt.Errorf("virtual: %w", err)
	}
	if c.Dest, err = parseConnAddr(f[5], f[6]); err != nil {
		return Conn{}, fmt.Errorf("destination: %w", err)
	}
	c.State = f[7]
	if c.State == "" || strings.ContainsFunc(c.State, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r == '_') }) {
		return Conn{}, fmt.Errorf("state %q: want an upper-case name", f[7])
	}
	// Expires is the first number after the state; persistence-engine
	// columns (PEName PEData) may surround it depending on the kernel.
	found := false
	for _, x := range f[8:] {
		if n, err := strconv.ParseUint(x, 10, 32); err == nil {
			c.Expires = uint32(n)
			found = true
			break
		}
	}
	if !found {
		return Conn{}, fmt.Errorf("no expiry in %q", s)
	}
	c.Template = c.Client.Port() == 0
	return c, nil
}

// parseConnAddr reads an address (8 hex digits for IPv4, colon-separated
// IPv6) and a 4-hex-digit port.
func parseConnAddr(a, p string) (netip.AddrPort, error) {
	if len(p) != 4 {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 4 hex digits", p)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", p, err)
	}
	var ip netip.Addr
	if len(a) == 8 && !strings.Contains(a, ":") {
		n, err := strconv.ParseUint(a, 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("address %q: %w", a, err)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n))
		ip = netip.AddrFrom4(b)
	} else {
		ip, err = netip.ParseAddr(a)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return netip.AddrPort{}, fmt.Errorf("address %q: want 8 hex digits or an IPv6 address", a)
		}
		ip = ip.Unmap()
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// flowID is a stable id of a connection (its 4-tuple and real server).
func flowID(c Conn) uint64 {
	h := fnv.New64a()
	var b bytes.Buffer
	b.WriteByte(byte(c.Protocol))
	for _, ap := range []netip.AddrPort{c.Client, c.Virtual, c.Dest} {
		x, _ := ap.MarshalBinary()
		b.Write(x)
	}
	h.Write(b.Bytes())
	return h.Sum64()
}
