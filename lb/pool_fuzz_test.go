package lb

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseRange: whatever the input, ParseRange either returns a
// well-formed range whose String() parses back to the same range, or an
// error that quotes the input.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"192.0.2.0/24", "192.0.2.10-192.0.2.20", "2001:db8::/120", "192.0.2.7"} {
		f.Add(s) // more seeds under testdata/fuzz/FuzzParseRange
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			if strings.TrimSpace(s) != "" && !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseRange(%q): error %q does not quote the input", s, err)
			}
			return
		}
		if !r.First.IsValid() || !r.Last.IsValid() {
			t.Fatalf("ParseRange(%q) = %v: invalid bound", s, r)
		}
		if r.First.Is4() != r.Last.Is4() || r.First.Is4In6() || r.Last.Is4In6() {
			t.Fatalf("ParseRange(%q) = %v: mixed or mapped family", s, r)
		}
		if r.First.Zone() != "" || r.Last.Zone() != "" {
			t.Fatalf("ParseRange(%q) = %v: zone", s, r)
		}
		if r.Last.Less(r.First) {
			t.Fatalf("ParseRange(%q) = %v: last before first", s, r)
		}
		if !r.Contains(r.First) || !r.Contains(r.Last) {
			t.Fatalf("ParseRange(%q) = %v: does not contain its bounds", s, r)
		}
		if r.Size().Sign() <= 0 {
			t.Fatalf("ParseRange(%q) = %v: size %v", s, r, r.Size())
		}
		str := r.String()
		back, err := ParseRange(str)
		if err != nil {
			t.Fatalf("ParseRange(%q) = %v, String() %q does not parse: %v", s, r, str, err)
		}
		if back != r {
			t.Fatalf("ParseRange(%q) = %v, String() %q parses to %v", s, r, str, back)
		}
		if back.String() != str {
			t.Fatalf("String not stable: %q then %q", str, back.String())
		}
	})
}
