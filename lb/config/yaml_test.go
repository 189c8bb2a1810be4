package config

import (
	"bytes"
	"encoding/json"
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
}

// FuzzDecodeYAMLSameAsJSONPath: the equivalence above for any input.
func FuzzDecodeYAMLSameAsJSONPath(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsJSONPath(t, data) })
}
