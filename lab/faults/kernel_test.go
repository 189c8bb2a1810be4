//go:build netns || k8s

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/nftables"

	"github.com/edgelb/edgelb/lab/netns"
)

// kernel is edgelb's nftables table as `nft -j list table` shows it, read
// independently of proxy/nft (the CLI's JSON, not the dataplane's own
// read-back), reduced to what the config determines: which frontends exist,
// where each dispatches, and which backends fill its buckets.
type kernel struct {
	vip      map[string]uint32 // "addr proto port" → id (the vip map's data)
	np       map[string]uint32 // "proto port" → id
	nodes    map[string]bool
	dispatch map[uint32]string // id → goto target
	post     map[uint32]string
	be       map[uint32]map[uint32]string // id → bucket → "addr:port"
	aff      int                          // remembered clients (packet path writes them)
	chains   map[string]bool
	rules    []string // "chain|comment", sorted
	foreign  []string // rules without edgelb's comment
	elements int
}

var errNoTable = errors.New("no edgelb table")

// readKernel lists `<family> edgelb` inside ns (family "ip" or "ip6").
func readKernel(ns *netns.NS, family string) (*kernel, error) {
	out, err := ns.Command(context.Background(), "nft", "-j", "list", "table", family, "edgelb").Output()
	if err != nil {
		var ee interface{ ExitCode() int }
		if errors.As(err, &ee) {
			return nil, errNoTable
		}
		return nil, err
	}
	return parseKernel(out)
}

func parseKernel(data []byte) (*kernel, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("nft -j output: %w", err)
	}
	k := &kernel{vip: map[string]uint32{}, np: map[string]uint32{}, nodes: map[string]bool{},
		dispatch: map[uint32]string{}, post: map[uint32]string{}, be: map[uint32]map[uint32]string{}, chains: map[string]bool{}}
	for _, obj := range doc.Nftables {
		switch {
		case obj["map"] != nil || obj["set"] != nil:
			raw := obj["map"]
			if raw == nil {
				raw = obj["set"]
			}
			var s struct {
				Name string            `json:"name"`
				Elem []json.RawMessage `json:"elem"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			for _, el := range s.Elem {
				if err := k.addElem(s.Name, el); err != nil {
					return nil, fmt.Errorf("set %s element %s: %w", s.Name, el, err)
				}
			}
		case obj["chain"] != nil:
			var c struct{ Name string }
			if err := json.Unmarshal(obj["chain"], &c); err != nil {
				return nil, err
			}
			k.chains[c.Name] = true
		case obj["rule"] != nil:
			var r struct{ Chain, Comment string }
			if err := json.Unmarshal(obj["rule"], &r); err != nil {
				return nil, err
			}
			if strings.HasPrefix(r.Comment, "edgelb:") {
				k.rules = append(k.rules, r.Chain+"|"+r.Comment)
			} else {
				k.foreign = append(k.foreign, r.Chain+"|"+r.Comment)
			}
		}
	}
	sort.Strings(k.rules)
	return k, nil
}

func (k *kernel) addElem(set string, raw json.RawMessage) error {
	k.elements++
	if set == "nodeaddrs" {
		v, err := scalar(raw)
		k.nodes[v] = true
		return err
	}
	var kv []json.RawMessage
	if err := json.Unmarshal(unwrap(raw), &kv); err != nil || len(kv) != 2 {
		if set == "aff" { // dynamic elements may print in other shapes: only counted
			k.aff++
			return nil
		}
		return fmt.Errorf("want [key, value]")
	}
	key, val := unwrap(kv[0]), unwrap(kv[1])
	switch set {
	case "vip", "np":
		ks, err := scalar(key)
		if err != nil {
			return err
		}
		id, err := number(val)
		if err != nil {
			return err
		}
		if set == "vip" {
			k.vip[ks] = id
		} else {
			k.np[ks] = id
		}
	case "dispatch", "post":
		id, err := number(key)
		if err != nil {
			return err
		}
		var v map[string]struct{ Target string }
		if err := json.Unmarshal(val, &v); err != nil {
			return err
		}
		target := ""
		for verdict, t := range v {
			target = verdict + " " + t.Target
		}
		if set == "dispatch" {
			k.dispatch[id] = target
		} else {
			k.post[id] = target
		}
	case "be":
		var c struct{ Concat []json.RawMessage }
		if err := json.Unmarshal(key, &c); err != nil || len(c.Concat) != 2 {
			return fmt.Errorf("want id . bucket")
		}
		// The data maps print the id in host byte order, this key as the
		// number the rule builds: the same four bytes, reversed.
		id, err := number(c.Concat[0])
		if err != nil {
			return err
		}
		bucket, err := number(c.Concat[1])
		if err != nil {
			return err
		}
		target, err := scalar(val)
		if err != nil {
			return err
		}
		f := strings.Fields(target)
		if len(f) == 2 {
			target = f[0] + ":" + f[1]
			if strings.Contains(f[0], ":") {
				target = "[" + f[0] + "]:" + f[1]
			}
		}
		id = bits.ReverseBytes32(id)
		if k.be[id] == nil {
			k.be[id] = map[uint32]string{}
		}
		k.be[id][bucket] = target
	case "aff":
		k.aff++
	}
	return nil
}

// unwrap takes the value out of {"elem": {"val": ...}} (elements with a
// timeout or comment).
func unwrap(raw json.RawMessage) json.RawMessage {
	var w struct {
		Elem *struct {
			Val json.RawMessage `json:"val"`
		} `json:"elem"`
	}
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &w) == nil && w.Elem != nil {
		return w.Elem.Val
	}
	return raw
}

// scalar renders a string, a number or a concatenation as space-separated text.
func scalar(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), nil
	}
	var c struct{ Concat []json.RawMessage }
	if err := json.Unmarshal(raw, &c); err != nil || c.Concat == nil {
		return "", fmt.Errorf("unexpected value %s", raw)
	}
	parts := make([]string, len(c.Concat))
	for i, p := range c.Concat {
		v, err := scalar(p)
		if err != nil {
			return "", err
		}
		parts[i] = v
	}
	return strings.Join(parts, " "), nil
}

func number(raw json.RawMessage) (uint32, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("want a number, got %s", raw)
	}
	v, err := strconv.ParseUint(n.String(), 10, 32)
	return uint32(v), err
}

// baseChains exist whatever the services.
var baseChains = []string{"services", "nobackend", "prerouting", "output", "postrouting"}

// bucketsOf is how many buckets each backend must fill: weights divided by
// their gcd (the test configs stay under proxy/nft's 128-bucket cap), all
// 1 for rr, none for weight 0.
func bucketsOf(s svcDef) map[string]int {
	g := uint32(0)
	for _, b := range s.Backends {
		if b.Weight > 0 {
			g = gcd(g, b.Weight)
		}
	}
	out := map[string]int{}
	for _, b := range s.Backends {
		switch {
		case b.Weight == 0:
		case s.Scheduler == "rr":
			out[b.Addr.String()] = 1
		default:
			out[b.Addr.String()] = int(b.Weight / g)
		}
	}
	return out
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// diff lists every way the kernel differs from what want and nodes say:
// missing or wrong frontends, dispatch, masquerade, buckets, and anything
// stale (frontends, ids, chains no service needs). Empty means converged.
func (k *kernel) diff(want []svcDef, nodes []netip.Addr) []string {
	var probs []string
	add := func(f string, a ...any) { probs = append(probs, fmt.Sprintf(f, a...)) }
	used := map[uint32]bool{}
	chains := map[string]bool{}
	for _, c := range baseChains {
		chains[c] = true
	}
	seenVIP, seenNP := map[string]bool{}, map[string]bool{}
	for _, s := range want {
		// The VIP and the node port are separate services since issue 14
		// (the node port one per family; this lab is IPv4): each id is
		// checked against s.
		var ids []uint32
		if s.VIP.IsValid() {
			key := fmt.Sprintf("%s tcp %d", s.VIP, s.Port)
			seenVIP[key] = true
			if id, ok := k.vip[key]; ok {
				ids = append(ids, id)
			} else {
				add("missing frontend %s (%s)", key, s.Name)
			}
		}
		if s.NodePort != 0 {
			key := fmt.Sprintf("tcp %d", s.NodePort)
			seenNP[key] = true
			if nid, ok := k.np[key]; ok {
				ids = append(ids, nid)
			} else {
				add("missing node port %s (%s)", key, s.Name)
			}
		}
		for _, id := range ids {
			used[id] = true
			wb := bucketsOf(s)
			n := 0
			for _, c := range wb {
				n += c
			}
			pick := "goto nobackend"
			if n > 0 {
				pick = fmt.Sprintf("goto pick-r%d", n)
				chains[fmt.Sprintf("pick-r%d", n)] = true
			}
			if got := k.dispatch[id]; got != pick {
				add("%s: dispatch %q, want %q", s.Name, got, pick)
			}
			// No affinity here: postrouting goes by the id's class (bits
			// 22-23: 0x80 masquerade for nat, the default; 0xc0 for
			// nat-nosnat), without a post map entry or a post-* chain.
			class := uint32(0x00800000)
			if s.Method == "nat-nosnat" {
				class = 0x00c00000
			}
			// (nft prints the mark as the bytes lie in memory, host order.)
			if hid := bits.ReverseBytes32(id); hid&0xffc00000 != 0xed000000|class {
				add("%s: id %#x, want class %#x", s.Name, hid, class)
			}
			if got, ok := k.post[id]; ok {
				add("%s: post entry %q, want none", s.Name, got)
			}
			got := map[string]int{}
			for b, target := range k.be[id] {
				if int(b) >= n {
					add("%s: bucket %d beyond %d", s.Name, b, n)
				}
				got[target]++
			}
			if len(k.be[id]) != n || !mapsEqual(got, wb) {
				add("%s: buckets %v, want %v", s.Name, got, wb)
			}
		}
	}
	for key := range k.vip {
		if !seenVIP[key] {
			add("stale frontend %s", key)
		}
	}
	for key := range k.np {
		if !seenNP[key] {
			add("stale node port %s", key)
		}
	}
	for _, m := range []struct {
		name string
		ids  []uint32
	}{{"dispatch", keys(k.dispatch)}, {"post", keys(k.post)}, {"be", keys(k.be)}} {
		for _, id := range m.ids {
			if !used[id] {
				add("stale %s entry for id %#x", m.name, id)
			}
		}
	}
	for c := range k.chains {
		if !chains[c] {
			add("stale chain %s", c)
		}
	}
	for c := range chains {
		if !k.chains[c] {
			add("missing chain %s", c)
		}
	}
	wantNodes := map[string]bool{}
	for _, a := range nodes {
		wantNodes[a.String()] = true
	}
	if !mapsEqual(k.nodes, wantNodes) {
		add("node addresses %v, want %v", k.nodes, wantNodes)
	}
	if len(k.foreign) > 0 {
		add("rules without edgelb's comment: %q", k.foreign)
	}
	sort.Strings(probs)
	return probs
}

func keys[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// summary shortens a problem list for a log line.
func summary(probs []string) string {
	if len(probs) <= 8 {
		return strings.Join(probs, "; ")
	}
	return fmt.Sprintf("%s; … (%d problems)", strings.Join(probs[:8], "; "), len(probs))
}

// vipCount counts the elements of edgelb's ip vip map over netlink (fast
// enough to poll during a sync); -1 when the table or map does not exist.
func vipCount(ns *netns.NS) int {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		return -1
	}
	defer c.CloseLasting()
	set, err := c.GetSetByName(&nftables.Table{Name: "edgelb", Family: nftables.TableFamilyIPv4}, "vip")
	if err != nil {
		return -1
	}
	els, err := c.GetSetElements(set)
	if err != nil {
		return -1
	}
	return len(els)
}
