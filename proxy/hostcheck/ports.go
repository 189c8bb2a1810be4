package hostcheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// PortRange is an inclusive range of L4 port numbers.
type PortRange struct {
	First, Last uint16
}

// String renders "30000-32767", or "22" for a single port.
func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Contains reports whether p is inside the range.
func (r PortRange) Contains(p uint16) bool { return r.First <= p && p <= r.Last }

// Len is the number of ports in the range.
func (r PortRange) Len() int { return int(r.Last) - int(r.First) + 1 }

// Overlaps reports whether the two ranges share a port.
func (r PortRange) Overlaps(o PortRange) bool { return r.First <= o.Last && o.First <= r.Last }

// Adjacent reports whether the ranges touch without sharing a port
// (30000-32767 and 32768-60999).
func (r PortRange) Adjacent(o PortRange) bool {
	return int(r.Last)+1 == int(o.First) || int(o.Last)+1 == int(r.First)
}

// ParsePortRange accepts "30000-32767" (the config form), "32768 60999" or
// "32768\t60999" (the form /proc/sys/net/ipv4/ip_local_port_range uses) or a
// single port. The first port must not be above the last.
func ParsePortRange(s string) (PortRange, error) {
	in := strings.TrimSpace(s)
	var a, b string
	if f := strings.Fields(in); len(f) == 2 {
		a, b = f[0], f[1]
	} else if x, y, ok := strings.Cut(in, "-"); ok {
		a, b = strings.TrimSpace(x), strings.TrimSpace(y)
	} else {
		a, b = in, in
	}
	first, err := parsePort(a)
	if err != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	last, err := parsePort(b)
	if err != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: %w", s, err)
	}
	if last < first {
		return PortRange{}, fmt.Errorf("invalid port range %q: last port is below the first", s)
	}
	return PortRange{First: first, Last: last}, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, fmt.Errorf("missing port number")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a port number (0-65535)", s)
	}
	return uint16(n), nil
}

// ParsePortList parses the kernel's port-list syntax used by
// net.ipv4.ip_local_reserved_ports: comma-separated ports and first-last
// ranges ("8080,30000-32767"); empty means no ports. The result is coalesced.
func ParsePortList(s string) ([]PortRange, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return nil, nil
	}
	var out []PortRange
	for _, part := range strings.Split(in, ",") {
		part = strings.TrimSpace(part)
		if strings.ContainsAny(part, " \t") {
			return nil, fmt.Errorf("invalid port list %q: %q has spaces inside", s, part)
		}
		r, err := ParsePortRange(part)
		if err != nil {
			return nil, fmt.Errorf("invalid port list %q: %w", s, err)
		}
		out = append(out, r)
	}
	return Coalesce(out), nil
}

// Coalesce sorts ranges and merges those that overlap or are adjacent, so
// the result is the shortest list covering the same ports.
func Coalesce(rs []PortRange) []PortRange {
	if len(rs) == 0 {
		return nil
	}
	s := append([]PortRange(nil), rs...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].First != s[j].First {
			return s[i].First < s[j].First
		}
		return s[i].Last < s[j].Last
	})
	out := []PortRange{s[0]}
	for _, r := range s[1:] {
		cur := &out[len(out)-1]
		if int(r.First) <= int(cur.Last)+1 {
			if r.Last > cur.Last {
				cur.Last = r.Last
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// FormatPortList renders ranges in the kernel's list syntax.
func FormatPortList(rs []PortRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Intersect returns the ports of r that are also in list.
func Intersect(r PortRange, list []PortRange) []PortRange {
	var out []PortRange
	for _, o := range Coalesce(list) {
		if !r.Overlaps(o) {
			continue
		}
		out = append(out, PortRange{First: max(r.First, o.First), Last: min(r.Last, o.Last)})
	}
	return out
}

// Subtract returns the ports of list that are not in minus.
func Subtract(list, minus []PortRange) []PortRange {
	cur := Coalesce(list)
	for _, m := range Coalesce(minus) {
		var next []PortRange
		for _, r := range cur {
			if !r.Overlaps(m) {
				next = append(next, r)
				continue
			}
			if r.First < m.First {
				next = append(next, PortRange{First: r.First, Last: m.First - 1})
			}
			if r.Last > m.Last {
				next = append(next, PortRange{First: m.Last + 1, Last: r.Last})
			}
		}
		cur = next
	}
	return cur
}

// listContains reports whether p is in one of the ranges.
func listContains(list []PortRange, p uint16) bool {
	for _, r := range list {
		if r.Contains(p) {
			return true
		}
	}
	return false
}
