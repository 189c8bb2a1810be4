package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// TestCheckStoreExitCodes (issue 13): `edgelb check` reads the state file
// read-only and exits with the code `edgelb run` would (0 starts, 3 the
// file cannot be trusted, 4 the file is gone while edgelb's tables are in
// the kernel), with a line naming the file and what is wrong. The kernel is
// faked here (checkKernelState); TestNetnsStoreDamageRefusesStart in
// lab/faults asks a real one.
func TestCheckStoreExitCodes(t *testing.T) {
	tables := []string{"table ip edgelb"}
	// write stores alpha on .1 and bravo on .2 (REST services: only the
	// file knows them) and returns the state file's path.
	write := func(t *testing.T, dir string) string {
		path := filepath.Join(dir, "edgelb.db")
		st, err := store.OpenBolt(path, store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r, _ := lb.ParseRange("192.0.2.0/24")
		c := store.Change{
			PutPools:       []store.Pool{{Pool: lb.Pool{Name: "p", AutoAssign: true, Ranges: []lb.Range{r}}, Origin: store.OriginConfig}},
			PutAssignments: map[string][]netip.Addr{},
		}
		for i, name := range []string{"alpha", "bravo"} {
			spec := lb.ServiceSpec{Name: name, Ports: []lb.PortSpec{{Port: 80, Protocol: proxy.TCP}},
				Backends: []lb.BackendSpec{{Addr: netip.MustParseAddr("198.51.100.1"), Weight: 1}}}
			c.PutServices = append(c.PutServices, store.Service{Spec: spec, Origin: store.OriginAPI})
			c.PutAssignments[name] = []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)})}
		}
		if err := st.Commit(c); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rewrite := func(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		kernel []string // edgelb's tables the fake kernel holds
		code   int
		words  string
	}{
		{"untouched", func(*testing.T, string) {}, tables, 0, "every record's checksum matches"},
		{"an assignment's address rewritten to a free one", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			i := bytes.Index(b, []byte(`"192.0.2.2"`))
			if i < 0 {
				t.Fatal("bravo's assignment not found in the file")
			}
			b[i+len(`"192.0.2.2`)-1] = '9' // 192.0.2.9: free
			os.WriteFile(path, b, 0o600)
		}, tables, 3, `record assignments/"bravo"): checksum mismatch`},
		{"a parsable record giving bravo alpha's address", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("assignments")).Put([]byte("bravo"), store.FrameForTest("bravo", []byte(`{"v":1,"ips":["192.0.2.1"]}`)))
			})
		}, tables, 3, `address 192.0.2.1 is in use by service "alpha"`},
		{"a newer schema version", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("9")) })
		}, tables, 3, `schema version "9"`},
		{"both meta pages zeroed", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			f.WriteAt(make([]byte, 8192), 0)
			f.Close()
		}, tables, 3, "is damaged: invalid database"},
		{"written before checksums (schema 1)", func(t *testing.T, path string) {
			rewrite(t, path, func(tx *bolt.Tx) error {
				tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("1"))
				return tx.Bucket([]byte("assignments")).Put([]byte("alpha"), []byte(`{"v":1,"ips":["192.0.2.1"]}`))
			})
		}, tables, 0, "written before checksums (schema 1)"},
		{"0 bytes, edgelb's tables in the kernel", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o600) }, tables, 4,
			"is empty, but edgelb's tables are in the kernel"},
		{"missing, edgelb's tables in the kernel", func(t *testing.T, path string) { os.Remove(path) }, tables, 4,
			"is missing, but edgelb's tables are in the kernel"},
		{"missing, no tables: a first start", func(t *testing.T, path string) { os.Remove(path) }, nil, 0,
			"is missing: a first start"},
	}
	old := checkKernelState
	t.Cleanup(func() { checkKernelState = old })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := write(t, dir)
			c.damage(t, path)
			checkKernelState = func() ([]string, error) { return c.kernel, nil }
			// Host checks would read this machine; the store's checks
			// come first, and a clean store is checked with --no-host
			// (which does not ask the kernel about a missing file).
			args := []string{}
			if c.code == 0 {
				args = append(args, "--no-host")
			}
			code, out := runCheck(t, `
pools:
  - name: p
    addresses: ["192.0.2.0/24"]
state:
  dir: `+dir+`
`, args...)
			line := lastLineWith(out, "state: ")
			t.Logf("%s → exit %d: %s", c.name, code, line)
			if code != c.code || !strings.Contains(line, c.words) || !strings.Contains(line, path) {
				t.Fatalf("want exit %d and %q naming %s:\n%s", c.code, c.words, path, out)
			}
			if c.code == 3 && !strings.Contains(line, "edgelb cleanup") {
				t.Errorf("no way out in: %s", line)
			}
		})
	}
}

func lastLineWith(s, substr string) string {
	out := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = l
		}
	}
	return out
}
