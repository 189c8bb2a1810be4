package config

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// splitSameAsWhole: when parseSplit takes a document, it gives the Config
// and the errors (field, value, message, order) the whole parse gives.
// It reports whether the split parse took it.
func splitSameAsWhole(t *testing.T, data []byte) bool {
	t.Helper()
	e := env{readFile: func(string) ([]byte, error) { return []byte("placeholder\n"), nil }}
	split, ok, serr := parseSplit(data, e)
	if !ok {
		return false
	}
	whole, werr := parseWhole(data, e)
	if (serr == nil) != (werr == nil) {
		t.Fatalf("%s:\nsplit error %v\nwhole error %v", clip(data), serr, werr)
	}
	if serr != nil {
		s, w := serr.(*Errors).Lines(), werr.(*Errors).Lines()
		if !reflect.DeepEqual(s, w) {
			t.Fatalf("%s: errors differ\nsplit %q\nwhole %q", clip(data), s, w)
		}
		return true
	}
	if !reflect.DeepEqual(split, whole) {
		t.Fatalf("%s: configs differ\nsplit %+v\nwhole %+v", clip(data), split, whole)
	}
	return true
}

// clip quotes a document for a failure message, at most 2,000 bytes of it.
func clip(data []byte) string {
	if len(data) > 2000 {
		return fmt.Sprintf("%q… (%d bytes)", data[:2000], len(data))
	}
	return fmt.Sprintf("%q", data)
}

// mistakes are what one service item can get wrong, each caught at a
// different stage: the YAML's shape (decodeValue), conversion, validation
// of one service, validation across services.
var mistakes = []func(i int) string{
	func(i int) string {
		return fmt.Sprintf("{name: s%d, ports: [{port: 80}], backends: [{address: \"198.51.100.300:80\"}]}", i)
	},
	func(i int) string { return fmt.Sprintf("{name: s%d, colour: red, ports: [{port: 80}]}", i) },
	func(i int) string { return fmt.Sprintf("{name: s%d, ports: [{port: 70000}]}", i) },
	func(i int) string { return fmt.Sprintf("{name: s%d, ports: [{protocol: TCP}]}", i) },
	func(i int) string { return fmt.Sprintf("{name: s%d, scheduler: fastest, ports: [{port: 80}]}", i) },
	func(i int) string { return "{name: s0, ports: [{port: 80}]}" }, // a second s0
	func(i int) string {
		return fmt.Sprintf("{name: s%d, vip: 203.0.113.9, vips: [203.0.113.8], ports: [{port: 80}]}", i)
	},
	func(i int) string {
		return fmt.Sprintf("{name: s%d, ports: [{port: 80}], backends: [{address: 198.51.100.1, weight: heavy}]}", i)
	},
	func(i int) string { return fmt.Sprintf("{name: s%d, ports: [{port: 80}], backends: 5}", i) },
	func(i int) string { return "hello" },
	func(i int) string { return fmt.Sprintf("{name: s%d, method: teleport, ports: [{port: 80}]}", i) },
	func(i int) string { return fmt.Sprintf("{name: \"\", ports: [{port: %d}]}", 80+i) },
	func(i int) string { return "{name: {first: x, last: y}, ports: [{port: 80}]}" },
	func(i int) string { return fmt.Sprintf("{name: s%d, ports: {port: 80}}", i) },
	func(i int) string { return fmt.Sprintf("{name: s%d, ports: [{port: 80, Protocol: TCP}]}", i) },
}

// randomConfig writes n services, some with mistakes, in block or flow
// items, with a dataplane section (its snat decides services' default
// method) before or after the list.
func randomConfig(r *rand.Rand, n int) []byte {
	var b strings.Builder
	dp := fmt.Sprintf("dataplane:\n  mode: nftables\n  snat: %v\n", r.IntN(2) == 0)
	dpFirst := r.IntN(2) == 0
	if dpFirst {
		b.WriteString(dp)
	}
	b.WriteString("pools:\n  - {name: bulk, addresses: [203.0.113.0/24]}\nservices:\n")
	for i := 0; i < n; i++ {
		if r.IntN(8) == 0 {
			fmt.Fprintf(&b, "  - %s\n", mistakes[r.IntN(len(mistakes))](i))
			continue
		}
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, "  - {name: s%d, pool: bulk, ports: [{port: %d}], backends: [{address: \"198.51.100.%d:80\", weight: %d}]}\n", i, 1000+i, 1+i%250, r.IntN(5))
			continue
		}
		fmt.Fprintf(&b, "  - name: s%d\n    pool: bulk\n    ports: [{port: %d}]\n    backends: [{address: \"198.51.100.%d:80\"}]\n", i, 1000+i, 1+i%250)
	}
	if !dpFirst {
		b.WriteString(dp)
	}
	return []byte(b.String())
}

// TestParseSplitSameAsWhole: 300 random configs of 2–250 services, about
// one in eight items wrong in one of fifteen ways, some with no mistake;
// each is split (so every chunk's first index is used) and gives what the
// whole parse gives.
func TestParseSplitSameAsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 2))
	clean, withErrors := 0, 0
	for k := 0; k < 300; k++ {
		data := randomConfig(r, 2+r.IntN(249))
		if !splitSameAsWhole(t, data) {
			t.Fatalf("config %d (%d bytes) not split", k, len(data))
		}
		if _, err := parseWhole(data, env{readFile: readRegular}); err != nil {
			withErrors++
		} else {
			clean++
		}
	}
	// Both kinds were compared (a generator that made only one would
	// prove half of it).
	if clean == 0 || withErrors == 0 {
		t.Fatalf("%d clean configs, %d with errors: want both", clean, withErrors)
	}
}

// FuzzParseSplitSameAsWhole: the equivalence above for any input the split
// parse takes.
func FuzzParseSplitSameAsWhole(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 8; k++ {
		f.Add(randomConfig(r, 2+r.IntN(20)))
	}
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { splitSameAsWhole(t, data) })
}
