package main

import (
	"errors"
	"strings"
	"testing"
)

func TestParseStoreSpec(t *testing.T) {
	for _, c := range []struct {
		in, kind string
		n        int
		bad      bool
	}{
		{"bbolt:/var/lib/edgelb/edgelb.db", "bbolt", 0, false},
		{"etcd:http://10.0.0.1:2379", "etcd", 1, false},
		{"etcd:https://a:2379,https://b:2379", "etcd", 2, false},
		{"etcd:10.0.0.1:2379", "", 0, true},
		{"etcd:", "", 0, true},
		{"bbolt", "", 0, true},
		{"zk:/x", "", 0, true},
	} {
		s, err := parseStoreSpec("to", c.in)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "--to") || !strings.Contains(err.Error(), c.in) {
				t.Errorf("%q: want an error naming --to and quoting the value, got %v", c.in, err)
			}
			continue
		}
		if err != nil || s.kind != c.kind || len(s.endpoints) != c.n {
			t.Errorf("%q: got %+v, %v", c.in, s, err)
		}
	}
}

// FuzzParseStoreSpec: any input is a typed spec or an error naming the
// flag; never a panic, never an etcd spec without endpoints.
func FuzzParseStoreSpec(f *testing.F) {
	for _, s := range []string{"bbolt:/x", "etcd:http://a:1", "etcd:https://[::1]:2379,http://b:2", "etcd:,", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseStoreSpec("from", in)
		if err != nil {
			if !strings.Contains(err.Error(), "--from") {
				t.Fatalf("%q: error without the flag: %v", in, err)
			}
			return
		}
		switch s.kind {
		case "bbolt":
			if s.path == "" {
				t.Fatalf("%q: bbolt without a path", in)
			}
		case "etcd":
			if len(s.endpoints) == 0 {
				t.Fatalf("%q: etcd without endpoints", in)
			}
		default:
			t.Fatal(errors.New("unknown kind " + s.kind))
		}
	})
}

// TestCheckFleetStore: check does not look for a bbolt file in a fleet.
func TestCheckFleetStore(t *testing.T) {
	code, out := runCheck(t, `
pools:
  - name: a
    addresses: ["192.0.2.0/25"]
state: {type: etcd, endpoints: ["http://192.0.2.200:2379"]}
`, "--no-host")
	if code != 0 || !strings.Contains(out, "shared by a fleet in etcd") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
