package bgp

import "testing"

func TestParseCommunity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Community
		ok   bool
	}{
		{"65000:100", 65000<<16 | 100, true},
		{"0:0", 0, true},
		{"65535:65535", 0xFFFFFFFF, true},
		{"no-export", 0xFFFFFF01, true},
		{"NO-EXPORT", 0, false}, // names as lb's validator takes them: lower case
		{"blackhole", 0xFFFF029A, true},
		{"graceful-shutdown", 0xFFFF0000, true},
		{"65536:1", 0, false},
		{"1:65536", 0, false},
		{"65000", 0, false},
		{"65000:", 0, false},
		{":1", 0, false},
		{"+1:2", 0, false},
		{"1:-2", 0, false},
		{" 1:2", 0, false},
		{"1:2:3", 0, false},
		{"0x10:1", 0, false},
		{"no-such-name", 0, false},
		{"", 0, false},
	} {
		got, ok := parseCommunity(tc.in)
		if tc.ok != ok || got != tc.want {
			t.Errorf("parseCommunity(%q) = %v, %v; want %v ok=%v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseLargeCommunity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LargeCommunity
		ok   bool
	}{
		{"65000:1:2", LargeCommunity{65000, 1, 2}, true},
		{"4294967295:4294967295:4294967295", LargeCommunity{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, true},
		{"4294967296:1:2", LargeCommunity{}, false},
		{"1:2", LargeCommunity{}, false},
		{"1:2:3:4", LargeCommunity{}, false},
		{"1::3", LargeCommunity{}, false},
		{"a:b:c", LargeCommunity{}, false},
		{"no-export", LargeCommunity{}, false},
	} {
		got, ok := parseLargeCommunity(tc.in)
		if tc.ok != ok || got != tc.want {
			t.Errorf("parseLargeCommunity(%q) = %v, %v; want %v ok=%v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseCommunity: never panics; what parses prints back to the same value.
func FuzzParseCommunity(f *testing.F) {
	for _, s := range []string{"65000:100", "no-export", "0:0", "65535:65535", "65536:1", "1:2:3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseCommunity(s)
		if !ok {
			return
		}
		back, ok := parseCommunity(c.String())
		if !ok || back != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, c, c.String(), back, ok)
		}
	})
}

// FuzzParseLargeCommunity: never panics; what parses prints back to the same value.
func FuzzParseLargeCommunity(f *testing.F) {
	for _, s := range []string{"65000:1:2", "4294967295:0:0", "1:2", "1:2:3:4", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseLargeCommunity(s)
		if !ok {
			return
		}
		back, ok := parseLargeCommunity(c.String())
		if !ok || back != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, c, c.String(), back, ok)
		}
	})
}
