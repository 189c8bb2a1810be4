package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// goYAMLItems is what the split parse did with every chunk before fastItems.
func goYAMLItems(chunk []byte) ([]any, error) {
	var seq []any
	if err := yaml.UnmarshalStrict(chunk, &seq); err != nil {
		return nil, err
	}
	v, err := jsonable(seq)
	if err != nil {
		return nil, err
	}
	l, _ := v.([]any)
	return l, nil
}

// sameAsGoYAML: whatever fastItems takes, go-yaml reads without error and
// to the same values.
func sameAsGoYAML(t *testing.T, chunk []byte) bool {
	t.Helper()
	got, ok := fastItems(chunk)
	if !ok {
		return false
	}
	want, err := goYAMLItems(chunk)
	if err != nil {
		t.Fatalf("%q: fastItems took a chunk go-yaml refuses: %v", chunk, err)
	}
	if !reflect.DeepEqual(plain(got), want) {
		t.Fatalf("%q:\nfastItems %#v\ngo-yaml   %#v", chunk, got, want)
	}
	return true
}

// plain is v with every pairs a map[string]any, as go-yaml gives them.
func plain(v any) any {
	switch x := v.(type) {
	case pairs:
		m := make(map[string]any, len(x))
		for _, kv := range x {
			m[kv.k] = plain(kv.v)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plain(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = plain(e)
		}
		return l
	}
	return v
}

// flowLines are services as lab/faults and most generators write them.
func flowLines(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: bulk-%d, pool: bulk, vip: 203.0.113.%d, sharingKey: bulk, ports: [{port: %d, nodePort: 30080}], backends: [", i, 1+i%250, 1000+i/250)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{address: \"198.51.100.%d:8080\", weight: %d}", 11+j, 1+(i+j)%3)
		}
		b.WriteString("]}\n")
	}
	return []byte(b.String())
}

// blockItems: plainConfig's services (block mappings of one-line values).
func blockItems(n int) []byte {
	doc := plainConfig(n)
	return doc[strings.Index(string(doc), "services:\n")+len("services:\n"):]
}

// TestFastItemsTakesGeneratedShapes: the two shapes of a long services list
// are read by fastItems, to what go-yaml reads.
func TestFastItemsTakesGeneratedShapes(t *testing.T) {
	for name, chunk := range map[string][]byte{
		"flow":  flowLines(300),
		"block": blockItems(300),
		"mixed": []byte("- {name: a, ports: [], x: {}, on_: true, off_: false, n_: null}\n\n  # a comment\n- name: b\n  vip: \"2001:db8::1\"\n  weight: -3\n  label: 'it is'\n- name: c\n"),
	} {
		if !sameAsGoYAML(t, chunk) {
			t.Errorf("%s: not taken by fastItems", name)
		}
	}
}

// TestFastItemsLeavesDoubtToGoYAML: every scalar whose YAML 1.1 type or
// text needs go-yaml's rules, and every layout beyond one-line values, is
// refused, so go-yaml reads it.
func TestFastItemsLeavesDoubtToGoYAML(t *testing.T) {
	for _, c := range []string{
		"- {a: yes}", "- {a: No}", "- {a: on}", "- {a: y}", "- {a: 0x1F}", "- {a: 017}", "- {a: 0o17}", "- {a: 1.5}",
		"- {a: 1e3}", "- {a: -0}", "- {a: +1}", "- {a: 1_000}", "- {a: .inf}", "- {a: 2001-01-01}", "- {a: ~}",
		"- {a: 2001:db8::1}", "- {a: \"x\\ty\"}", "- {a: 'it''s'}", "- {a: 1, a: 2}", "- {a: [1, 2,]}", "- {a: b} # c",
		"- a: b\n  c:\n    d: e", "- a: b\n   c: d", "-  a: b", "- {a: [1,\n  2]}", "- {a: !!str 1}", "- {a: &x 1}",
		"- {a: *x}", "- {? a: b}", "- {a: b c}", "- a: b c", "- {a: \"\xff\"}", "- {\"a\":1}", "- {a}", "- [a: b]",
		"- {a: 1}\n  b: 2", "- a: 1\n- - b", "- {Yes: 1}", "- {1: a}", "- {true: a}", "- a: |\n    x", "-\n  a: b",
		"- {a: \"\u2028\"}", "\ufeff- {a: b}", "- {a: b}\r\n", "- {a: b}\n\t# tab",
	} {
		if _, ok := fastItems([]byte(c)); ok {
			t.Errorf("%q: taken by fastItems, want it left to go-yaml", c)
		}
	}
}

// FuzzFastItemsSameAsGoYAML: the property of sameAsGoYAML for any chunk.
func FuzzFastItemsSameAsGoYAML(f *testing.F) {
	f.Add(flowLines(3))
	f.Add(blockItems(3))
	for _, s := range []string{
		"- {a: b}", "- {a: 1, b: [x, 2, \"y\"], c: {d: 'e'}}", "- a: 1\n  b: [1.2.3.4]\n", "- {a: -12}\n- {b: 0}",
		"- {a: yes}", "- {a: 1.5}", "- {a: 0x1F}", "- {a: \"\"}", "- {a: ''}", "- {a: null, b: true, c: false}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chunk []byte) { sameAsGoYAML(t, chunk) })
}

// BenchmarkFastItems: 10,000 flow-style services read by fastItems and by
// go-yaml (the split parse's per-chunk work before it), one core.
func BenchmarkFastItems(b *testing.B) {
	chunk := flowLines(10000)
	b.Run("fastItems", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			if _, ok := fastItems(chunk); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("go-yaml", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			if _, err := goYAMLItems(chunk); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFastItemsLeavesHugeMappingsToGoYAML: a flow mapping of more than
// maxPairs keys goes to go-yaml (a scan for repeats would be quadratic in
// its size); up to maxPairs it is read, as go-yaml reads it.
func TestFastItemsLeavesHugeMappingsToGoYAML(t *testing.T) {
	mapping := func(n int) []byte {
		var b strings.Builder
		b.WriteString("- {")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: %d", i, i)
		}
		b.WriteString("}\n")
		return []byte(b.String())
	}
	if !sameAsGoYAML(t, mapping(maxPairs)) {
		t.Fatalf("a mapping of %d keys was left to go-yaml", maxPairs)
	}
	for _, n := range []int{maxPairs + 1, 50000} {
		if _, ok := fastItems(mapping(n)); ok {
			t.Fatalf("fastItems took a mapping of %d keys", n)
		}
	}
}
