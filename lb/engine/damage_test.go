package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// TestStoreDamageTable (issue 13): a store damaged in each of the ways a
// disk, a bad shutdown or a hand edit damages it. Each must end in a typed
// error that names the file and the way out — or, where the damage touched
// nothing edgelb reads, in exactly the state it held — never a panic, never
// an address that silently moved.
func TestStoreDamageTable(t *testing.T) {
	pool := mustPool(t, "p", true, "192.0.2.0/24", "198.51.100.0/24")
	// Enough services that the file has pages beyond its first half.
	specs := []lb.ServiceSpec{svc("alpha", 80, "198.51.100.1"), svc("bravo", 80, "198.51.100.2"), svc("charlie", 80, "198.51.100.3")}
	for i := 0; i < 400; i++ {
		specs = append(specs, svc(fmt.Sprintf("bulk-%03d", i), 80, "198.51.100.9"))
	}
	// want: what a healthy restart restores.
	build := func(t *testing.T) (string, map[string][]netip.Addr) {
		path := filepath.Join(t.TempDir(), "edgelb.db")
		st, err := store.OpenBolt(path, store.BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e := start(t, st, Options{})
		if err := e.SyncConfig(ctx, []lb.Pool{pool}, specs); err != nil {
			t.Fatal(err)
		}
		got := assignments(t, e)
		st.Close()
		return path, got
	}
	rewrite := func(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	// rawRecord returns the framed bytes edgelb wrote for a record.
	rawRecord := func(t *testing.T, path, bucket, key string) []byte {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v []byte
		db.View(func(tx *bolt.Tx) error {
			v = slices.Clone(tx.Bucket([]byte(bucket)).Get([]byte(key)))
			return nil
		})
		return v
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, want map[string][]netip.Addr)
		want   error // nil: loads, and must hold exactly what it held
	}{
		{"a byte flipped in an assignment (its address now a free one)", func(t *testing.T, path string, want map[string][]netip.Addr) {
			b, _ := os.ReadFile(path)
			old := []byte(want["bravo"][0].String())
			i := bytes.Index(b, old)
			if i < 0 {
				t.Fatalf("record of bravo (%s) not found in the file", old)
			}
			b[i+len(old)-1]++ // 192.0.2.2 → 192.0.2.3 (free: the pool has 256)
			os.WriteFile(path, b, 0o600)
		}, store.ErrDamaged},
		{"a byte flipped in a service's spec", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			b, _ := os.ReadFile(path)
			i := bytes.Index(b, []byte("198.51.100.3"))
			if i < 0 {
				t.Fatal("charlie's backend not found in the file")
			}
			b[i+len("198.51.100.")] = '9'
			os.WriteFile(path, b, 0o600)
		}, store.ErrDamaged},
		// bbolt grows the file ahead of its data (sparse, in steps): what
		// matters is the data's extent, which the meta page records.
		{"truncated to half its data", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			os.Truncate(path, dataSize(t, path)/2)
		}, store.ErrDamaged},
		{"truncated by one page of its data", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			os.Truncate(path, dataSize(t, path)-int64(os.Getpagesize())) // bbolt pages are the OS page size
		}, store.ErrDamaged},
		{"the room grown ahead of the data cut off", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			os.Truncate(path, dataSize(t, path))
		}, nil},
		// bbolt keeps two meta pages and falls back to the other: the same
		// state (the last commit wrote both over time; see below).
		{"the first meta page overwritten", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			f.WriteAt(bytes.Repeat([]byte{0xff}, 64), 0)
			f.Close()
		}, nil},
		{"both meta pages zeroed", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			f.WriteAt(make([]byte, 2*4096), 0)
			f.Close()
		}, store.ErrDamaged},
		{"a parsable record giving bravo alpha's address (checksum and all)", func(t *testing.T, path string, want map[string][]netip.Addr) {
			rec := rawRecord(t, path, "assignments", "bravo")
			body := bytes.Replace(rec[6:], []byte(want["bravo"][0].String()), []byte(want["alpha"][0].String()), 1)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("assignments")).Put([]byte("bravo"), store.FrameForTest("bravo", body))
			})
		}, store.ErrConflict},
		{"an unframed record added by hand", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("assignments")).Put([]byte("delta"), []byte(`{"v":1,"ips":["192.0.2.77"]}`))
			})
		}, store.ErrDamaged},
		{"a newer schema version", func(t *testing.T, path string, _ map[string][]netip.Addr) {
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("9")) })
		}, store.ErrVersion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, want := build(t)
			c.damage(t, path, want)
			var got map[string][]netip.Addr
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("PANIC: %v", r)
					}
				}()
				st, err := store.OpenBolt(path, store.BoltOptions{})
				if err != nil {
					return err
				}
				defer st.Close()
				e, err := NewEngine(st, Options{})
				if err != nil {
					return err
				}
				c, cancel := context.WithCancel(ctx)
				defer cancel()
				go e.Run(c)
				got = assignments(t, e)
				return nil
			}()
			t.Logf("%s → %v", c.name, err)
			if c.want == nil {
				if err != nil {
					t.Fatalf("want a clean load, got %v", err)
				}
				if d := diffAssignments(want, got); d != "" {
					t.Fatalf("loaded, but assignments moved: %s", d)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("want errors.Is(err, %v), got %v", c.want, err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(path)) || !bytes.Contains([]byte(err.Error()), []byte("edgelb cleanup")) {
				t.Errorf("the error must name the file and the way out: %v", err)
			}
		})
	}
}

// dataSize is how far the state file's data extends (bbolt's high-water
// page), as its meta page says.
func dataSize(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	if st, _ := os.Stat(path); st == nil || st.Size() < n {
		t.Fatalf("the file is shorter than its data (%d) before any damage", n)
	}
	return n
}
