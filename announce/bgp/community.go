package bgp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/announce"
)

// Community is an RFC 1997 community: high 16 bits an AS, low 16 a value.
type Community uint32

// String renders "AS:VALUE" (well-known values too, as routers print them
// in numeric form).
func (c Community) String() string {
	return fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xFFFF)
}

var (
	errCommunity      = errors.New(`want ASN:VALUE (each 0..65535) or a well-known name such as "no-export"`)
	errLargeCommunity = errors.New("want GLOBAL:LOCAL1:LOCAL2 (each 0..4294967295)")
)

// parseCommunity parses "65000:100" or a well-known name
// (announce.WellKnownCommunities: the list lb's validator accepts).
func parseCommunity(s string) (Community, bool) {
	if c, ok := announce.WellKnownCommunities[s]; ok {
		return Community(c), true
	}
	as, val, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	a, err1 := parseDecimal(as, 16)
	v, err2 := parseDecimal(val, 16)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return Community(a<<16 | v), true
}

// LargeCommunity is an RFC 8092 large community.
type LargeCommunity struct {
	Global, Local1, Local2 uint32
}

func (c LargeCommunity) String() string {
	return fmt.Sprintf("%d:%d:%d", c.Global, c.Local1, c.Local2)
}

func (c LargeCommunity) less(o LargeCommunity) bool {
	if c.Global != o.Global {
		return c.Global < o.Global
	}
	if c.Local1 != o.Local1 {
		return c.Local1 < o.Local1
	}
	return c.Local2 < o.Local2
}

// parseLargeCommunity parses "65000:1:2".
func parseLargeCommunity(s string) (LargeCommunity, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return LargeCommunity{}, false
	}
	var v [3]uint32
	for i, p := range parts {
		n, err := parseDecimal(p, 32)
		if err != nil {
			return LargeCommunity{}, false
		}
		v[i] = n
	}
	return LargeCommunity{v[0], v[1], v[2]}, true
}

// parseDecimal accepts plain decimal digits only (no sign, no spaces, no
// base prefix): what a router config would show.
func parseDecimal(s string, bits int) (uint32, error) {
	if s == "" || len(s) > 10 {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	n, err := strconv.ParseUint(s, 10, bits)
	return uint32(n), err
}
