package bgp

import (
	"strings"
	"testing"
)

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
		{"NO-EXPORT", 0xFFFFFF01, true},
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
		got, err := ParseCommunity(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseCommunity(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+tc.in+`"`) {
			t.Errorf("error does not quote the value: %v", err)
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
		got, err := ParseLargeCommunity(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseLargeCommunity(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+tc.in+`"`) {
			t.Errorf("error does not quote the value: %v", err)
		}
	}
}

// FuzzParseCommunity: never panics; what parses prints back to the same value.
func FuzzParseCommunity(f *testing.F) {
	for _, s := range []string{"65000:100", "no-export", "0:0", "65535:65535", "65536:1", "1:2:3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCommunity(s)
		if err != nil {
			if !strings.Contains(err.Error(), "community") {
				t.Fatalf("error %v", err)
			}
			return
		}
		back, err := ParseCommunity(c.String())
		if err != nil || back != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, c, c.String(), back, err)
		}
	})
}

// FuzzParseLargeCommunity: never panics; what parses prints back to the same value.
func FuzzParseLargeCommunity(f *testing.F) {
	for _, s := range []string{"65000:1:2", "4294967295:0:0", "1:2", "1:2:3:4", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseLargeCommunity(s)
		if err != nil {
			return
		}
		back, err := ParseLargeCommunity(c.String())
		if err != nil || back != c {
			t.Fatalf("%q → %v → %q → %v, %v", s, c, c.String(), back, err)
		}
	})
}
