package metallb

import (
	"fmt"
	"sort"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// MetalLB before 0.13 read its configuration from a ConfigMap (metallb-
// system/config), a YAML document under data.config with kebab-case keys:
// peers, bgp-communities, address-pools (each with its protocol and
// bgp-advertisements) and bfd-profiles. MetalLB's own types for it
// (go.universe.tf/metallb/internal/config, v0.12.1 on the module proxy) are
// internal and unexported, so they cannot be imported; this is the small
// decoder instead. It rewrites the document into the v1beta1 objects
// MetalLB 0.13 itself converted it to — AddressPool (which kept protocol and
// bgpAdvertisements), BGPPeer, Community, BFDProfile — and the converter
// takes those as usual. Keys are renamed, never dropped: a key this table
// does not know is passed on as written and reported by the converter
// ("no edgelb equivalent").

// legacyKeys renames the ConfigMap's keys to the v1beta1 fields.
var legacyKeys = map[string]string{
	"my-asn": "myASN", "peer-asn": "peerASN", "peer-address": "peerAddress", "source-address": "sourceAddress",
	"peer-port": "peerPort", "hold-time": "holdTime", "keepalive-time": "keepaliveTime", "router-id": "routerID",
	"node-selectors": "nodeSelectors", "bfd-profile": "bfdProfile", "ebgp-multihop": "ebgpMultiHop",
	"match-labels": "matchLabels", "match-expressions": "matchExpressions",
	"avoid-buggy-ips": "avoidBuggyIPs", "auto-assign": "autoAssign", "bgp-advertisements": "bgpAdvertisements",
	"aggregation-length": "aggregationLength", "aggregation-length-v6": "aggregationLengthV6", "localpref": "localPref",
	"receive-interval": "receiveInterval", "transmit-interval": "transmitInterval", "detect-multiplier": "detectMultiplier",
	"echo-interval": "echoInterval", "echo-mode": "echoMode", "passive-mode": "passiveMode", "minimum-ttl": "minimumTtl",
}

// legacyConfig returns the data.config text of a MetalLB ConfigMap: a
// ConfigMap whose data.config is a mapping with one of the keys above.
func legacyConfig(m map[string]any) (string, bool) {
	if k, _ := m["kind"].(string); k != "ConfigMap" {
		return "", false
	}
	data, _ := m["data"].(map[string]any)
	text, _ := data["config"].(string)
	var cfg map[string]any
	if yaml.Unmarshal([]byte(text), &cfg) != nil {
		return "", false
	}
	for _, k := range []string{"address-pools", "peers", "bgp-communities", "bfd-profiles"} {
		if _, ok := cfg[k]; ok {
			return text, true
		}
	}
	return "", false
}

// readLegacy turns a ConfigMap's config into objects; base is the file
// line of data.config, so each object's Source is the line it starts on.
// Peers, which have no name there, are named peer-N (N from 1, in order).
func readLegacy(text, cmSource, file string, base int) ([]*Object, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: data.config: %w", ErrInput, cmSource, err)
	}
	lines := nodeLinesOf([]byte(text))
	src := func(key string, i int) string {
		// A literal block (config: |) starts on the line after data.config.
		return fmt.Sprintf("%s:%d", file, base+lines.under(key, i))
	}
	var objs []*Object
	add := func(kind, name, source string, spec map[string]any) {
		objs = append(objs, &Object{APIVersion: "metallb.io/v1beta1", Kind: kind, Name: name, Source: source, Spec: spec})
	}
	for i, it := range listOf(cfg, "address-pools") {
		spec := renamed(it).(map[string]any)
		name, _ := spec["name"].(string)
		delete(spec, "name")
		if name == "" {
			return nil, fmt.Errorf("%w: %s: address-pools[%d]: no name", ErrInput, src("address-pools", i), i)
		}
		add("AddressPool", name, src("address-pools", i), spec)
	}
	for i, it := range listOf(cfg, "peers") {
		add("BGPPeer", fmt.Sprintf("peer-%d", i+1), src("peers", i), renamed(it).(map[string]any))
	}
	for i, it := range listOf(cfg, "bfd-profiles") {
		spec := renamed(it).(map[string]any)
		name, _ := spec["name"].(string)
		delete(spec, "name")
		add("BFDProfile", name, src("bfd-profiles", i), spec)
	}
	if cm, ok := cfg["bgp-communities"].(map[string]any); ok {
		names := make([]string, 0, len(cm))
		for n := range cm {
			names = append(names, n)
		}
		sort.Strings(names)
		var list []any
		for _, n := range names {
			list = append(list, map[string]any{"name": n, "value": fmt.Sprint(cm[n])})
		}
		add("Community", "bgp-communities", src("bgp-communities", -1), map[string]any{"communities": list})
	}
	for k, v := range cfg {
		switch k {
		case "address-pools", "peers", "bfd-profiles", "bgp-communities":
		default:
			add("ConfigMap", "config", cmSource, map[string]any{"config." + k: v})
		}
	}
	return objs, nil
}

func listOf(m map[string]any, key string) []map[string]any {
	l, _ := m[key].([]any)
	var out []map[string]any
	for _, it := range l {
		if im, ok := it.(map[string]any); ok {
			out = append(out, im)
		}
	}
	return out
}

// renamed copies v with every known kebab-case key renamed.
func renamed(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if n, ok := legacyKeys[k]; ok {
				k = n
			}
			out[k] = renamed(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = renamed(e)
		}
		return out
	}
	return v
}

// nodeLines finds lines inside one YAML document (1-based, relative to
// its text): 0 where the document does not parse or has no such node.
type nodeLines struct{ root *yamlv3.Node }

func nodeLinesOf(text []byte) nodeLines {
	var n yamlv3.Node
	if yamlv3.Unmarshal(text, &n) != nil || len(n.Content) == 0 {
		return nodeLines{}
	}
	return nodeLines{root: n.Content[0]}
}

func child(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func lineOf(n *yamlv3.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// under is the line of key's i-th element (i < 0: of key's value).
func (l nodeLines) under(key string, i int) int {
	n := child(l.root, key)
	if i >= 0 && n != nil && n.Kind == yamlv3.SequenceNode && i < len(n.Content) {
		return lineOf(n.Content[i])
	}
	if n != nil && i < 0 {
		return lineOf(n)
	}
	return 0
}

// item is the line of items[j] (a List).
func (l nodeLines) item(j int) int { return l.under("items", j) }

// config is the line of data.config of the document (j < 0) or of items[j].
func (l nodeLines) config(j int) int {
	n := l.root
	if j >= 0 {
		items := child(n, "items")
		if items == nil || j >= len(items.Content) {
			return 0
		}
		n = items.Content[j]
	}
	return lineOf(child(child(n, "data"), "config"))
}
