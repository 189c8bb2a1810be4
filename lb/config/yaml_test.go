package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// viaJSON is how configs were decoded before decodeYAML: YAML rendered to
// JSON by sigs.k8s.io/yaml and parsed again with json.Number.
func viaJSON(data []byte) (any, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil && err != io.EOF {
		return nil, err
	}
	return v, nil
}

var yamlSeeds = []string{
	"", "~", "a: 1", "on: yes\noff: n\ny: Y", "a: 0x1F\nb: 017\nc: 0o17\nd: -0\ne: +12", "1: x\n1.5: y\ntrue: z\n~: w",
	"a: .inf", "a: -.Inf\nb: .NaN", "a: 1e30\nb: 1.0\nc: 0.000001\nd: 1e-7\ne: 123456789012345678901234567890",
	"a: 12345678901234567890\nb: -9223372036854775809\nc: 9223372036854775807", "a: !!binary aGVsbG8=",
	"a: \"\\xff\\xfe\"\nb: \"\\u00e9\"", "a: 1\na: 2", "a: &x [1, {b: c}]\nb: *x", "base: &b {x: 1}\nc:\n  <<: *b\n  y: 2",
	"a: 2001-01-01\nb: 2001-01-01T00:00:00Z", "? [a]\n: b", "- 1\n- [2, 3]\n- {a: b}", "a: 'it''s'\nb: |\n  x\n  y\n",
	"a: !!str 12\nb: !!int \"7\"\nc: !!float 1", "{\"a\": [1, 2.5, \"x\", null, true]}", "a: [", "\t- x", "a: b: c",
	// services: blocks, which the split parse takes (yaml_split.go)
	"pools: []\nservices:\n  - {name: a, ports: [{port: 1}]}\n  - name: b\n    ports:\n      - port: 2\napi: {listen: x}\n",
	"services:\n- a\n- b: [1,\n    2]\n# c\n-\n  - d\nx: 1\n",
	"services: # the list\n  - \"a\n    b\"\n  - 'c'\n  - |\n    d\n  - >-\n    e\n",
	"services:\n  - a\nservices:\n  - b\n  - c\n", "services:\n  - a\n  - b\n b: c\n", "services:\n  - a: \"x\nb: c\"\n  - d\n",
}

// The two paths give the same generic values for every document, or both
// refuse it.
func TestDecodeYAMLSameAsJSONPath(t *testing.T) {
	docs := append([]string{}, yamlSeeds...)
	docs = append(docs, string(plainConfig(20)))
	if b, err := os.ReadFile("../../systemd/config.example.yaml"); err == nil {
		docs = append(docs, string(b))
	}
	for _, d := range docs {
		sameAsJSONPath(t, []byte(d))
	}
}

func sameAsJSONPath(t *testing.T, data []byte) {
	t.Helper()
	got, err := decodeYAML(data)
	want, werr := viaJSON(data)
	if (err != nil) != (werr != nil) {
		t.Fatalf("%q: decodeYAML err %v, via JSON err %v", data, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\ndecodeYAML %#v\nvia JSON   %#v", data, got, want)
	}
	// The split parse (yaml_split.go), whatever the size: when it takes a
	// document it must give exactly what the whole parse gives.
	if split, ok := decodeYAMLSplit(data); ok {
		if werr != nil {
			t.Fatalf("%q: the split parse took a document the whole parse refuses (%v)", data, werr)
		}
		if !reflect.DeepEqual(split, want) {
			t.Fatalf("%q:\nsplit    %#v\nvia JSON %#v", data, split, want)
		}
	}
}

// decodeYAMLSplit puts the split read's values back together: the generic
// values parseSplit decodes chunk by chunk, as one document.
func decodeYAMLSplit(data []byte) (any, bool) {
	d, ok := splitYAML(data)
	if !ok {
		return nil, false
	}
	parts := make([][]any, len(d.chunks))
	if !d.items(func(c int, items []any) { parts[c] = items }) {
		return nil, false
	}
	all := []any{}
	for _, p := range parts {
		for _, it := range p {
			all = append(all, plain(it))
		}
	}
	d.head["services"] = all
	return d.head, true
}

// FuzzDecodeYAMLSameAsJSONPath: the equivalence above for any input.
func FuzzDecodeYAMLSameAsJSONPath(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsJSONPath(t, data) })
}

// TestSplitParseTakesPlainConfigs: the layouts a person or a generator
// writes — block items, one flow mapping per line, comments between, other
// keys after — are split, and give what the whole parse gives; a document
// the splitter must not touch is left to the whole parse.
func TestSplitParseTakesPlainConfigs(t *testing.T) {
	flow := "pools:\n  - {name: bulk, addresses: [203.0.113.0/24]}\nservices:\n"
	for i := 0; i < 300; i++ {
		flow += fmt.Sprintf("  - {name: s%d, pool: bulk, ports: [{port: %d}], backends: [{address: \"198.51.100.1:80\", weight: 2}]}\n", i, 1000+i)
		if i%50 == 0 {
			flow += "  # a comment between items\n\n"
		}
	}
	flow += "dataplane:\n  mode: nftables\n"
	for name, doc := range map[string]string{"block": string(plainConfig(300)), "flow": flow} {
		split, ok := decodeYAMLSplit([]byte(doc))
		if !ok {
			t.Fatalf("%s: not split", name)
		}
		whole, err := decodeYAML([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(split, whole) {
			t.Fatalf("%s: split and whole parses differ", name)
		}
		if n := len(split.(map[string]any)["services"].([]any)); n != 300 {
			t.Fatalf("%s: %d services, want 300", name, n)
		}
	}
	for _, doc := range []string{
		"services:\n  - a\n  - b\nx: &y 1\n",          // an anchor
		"services:\n  - a\n  - b\n---\nx: 1\n",        // a second document
		"services: [a, b]\n",                          // a flow sequence
		"services:\n  - a\n   - b\n",                  // an item out of line
		"\"services\":\n  - a\n  - b\n",               // a quoted key
		"services:\n  - a\n  - b\nservices:\n  - c\n", // twice
	} {
		if _, ok := decodeYAMLSplit([]byte(doc)); ok {
			t.Errorf("%q: split, want it left to the whole parse", doc)
		}
	}
}
