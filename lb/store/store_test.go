package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
	bolt "go.etcd.io/bbolt"
)

func testPool(t testing.TB, name string, origin Origin, ranges ...string) Pool {
	t.Helper()
	p := Pool{Origin: origin, Pool: lb.Pool{Name: name, AutoAssign: true, AvoidBuggyIPs: true,
		Advertisement: lb.Advertisement{Communities: []string{"65000:1"}, LocalPref: 100}}}
	for _, s := range ranges {
		r, err := lb.ParseRange(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p
}

func testService(name string, origin Origin) Service {
	return Service{Origin: origin, Spec: lb.ServiceSpec{
		Name:       name,
		VIPs:       []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Families:   []lb.Family{lb.IPv4, lb.IPv6},
		Pool:       "p1",
		SharingKey: "k",
		Ports:      []lb.PortSpec{{Name: "http", Port: 80, Protocol: proxy.TCP, NodePort: 30080, TargetPort: 8080}},
		Backends:   []lb.BackendSpec{{Addr: netip.MustParseAddr("198.51.100.2"), Port: 8080, Weight: 3}},
		Scheduler:  proxy.WeightedRoundRobin,
		Affinity:   3 * time.Minute,
		Method:     proxy.NAT,
		Health:     &lb.HealthCheck{Type: "http", Path: "/healthz", Interval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3},
	}}
}

// stores runs a test against every implementation.
func stores(t *testing.T, fn func(t *testing.T, open func() Store)) {
	t.Run("mem", func(t *testing.T) {
		m := NewMem()
		fn(t, func() Store { return m }) // "reopening" the fake returns the same memory
	})
	t.Run("bolt", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		var cur *Bolt
		t.Cleanup(func() {
			if cur != nil {
				cur.Close()
			}
		})
		fn(t, func() Store {
			if cur != nil {
				cur.Close()
			}
			b, err := OpenBolt(path, BoltOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur = b
			return b
		})
	})
}

func TestRoundTripAndRestart(t *testing.T) {
	stores(t, func(t *testing.T, open func() Store) {
		s := open()
		want := NewState()
		ch := Change{PutAssignments: map[string][]netip.Addr{}}
		for i := 0; i < 50; i++ {
			svc := testService(fmt.Sprint("svc-", i), OriginAPI)
			if i%2 == 0 {
				svc.Origin = OriginConfig
			}
			ips := []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i))}
			ch.PutServices = append(ch.PutServices, svc)
			ch.PutAssignments[svc.Spec.Name] = ips
			want.Services[svc.Spec.Name] = svc
			want.Assignments[svc.Spec.Name] = ips
		}
		for _, p := range []Pool{testPool(t, "p1", OriginConfig, "192.0.2.0/24", "2001:db8::/64"), testPool(t, "p2", OriginAPI, "198.51.100.10-198.51.100.20")} {
			ch.PutPools = append(ch.PutPools, p)
			want.Pools[p.Name] = p
		}
		if err := s.Commit(ch); err != nil {
			t.Fatal(err)
		}
		// Delete one service with its assignment in one change.
		if err := s.Commit(Change{DeleteServices: []string{"svc-7"}, DeleteAssignments: []string{"svc-7"}}); err != nil {
			t.Fatal(err)
		}
		delete(want.Services, "svc-7")
		delete(want.Assignments, "svc-7")
		// An empty assignment list deletes.
		if err := s.Commit(Change{PutAssignments: map[string][]netip.Addr{"svc-8": nil}}); err != nil {
			t.Fatal(err)
		}
		delete(want.Assignments, "svc-8")

		got, err := open().Load() // bolt: closed and reopened
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
		}
		for name, ips := range want.Assignments {
			if !reflect.DeepEqual(got.Assignments[name], ips) {
				t.Fatalf("assignment of %s changed: %v → %v", name, ips, got.Assignments[name])
			}
		}
		t.Logf("%d services, %d assignments restored unchanged", len(got.Services), len(got.Assignments))
	})
}

func TestCommitIsAtomic(t *testing.T) {
	stores(t, func(t *testing.T, open func() Store) {
		s := open()
		err := s.Commit(Change{
			PutServices:    []Service{testService("ok", OriginAPI)},
			PutAssignments: map[string][]netip.Addr{"ok": {{}}}, // invalid address: the whole change is refused
		})
		if err == nil {
			t.Fatal("invalid address stored")
		}
		if err := s.Commit(Change{PutServices: []Service{testService("x", "bogus")}}); err == nil {
			t.Fatal("unknown origin stored")
		}
		st, err := open().Load()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Services)+len(st.Assignments) != 0 {
			t.Fatalf("a refused change left %v", st)
		}
	})
}

func TestCorruptRecordNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		bucket, key, value, want string
	}{
		{"services", "web", `{"v":1,"origin":"api","spec":{"name":"web"`, `services/"web"`},
		{"services", "web", `{"v":9,"origin":"api","spec":{"name":"web"}}`, "record version 9"},
		{"services", "web", `{"v":1,"origin":"api","spec":{"name":"other"}}`, `names service "other"`},
		{"services", "web", `{"v":1,"origin":"api","spec":{"name":"web"},"extra":1}`, `unknown field "extra"`},
		{"pools", "p", `{"v":1,"origin":"config","name":"p","ranges":["192.0.2.1/24"]}`, `pools/"p"`},
		{"pools", "p", `{"v":1,"origin":"nobody","name":"p","ranges":[]}`, `unknown origin`},
		{"assignments", "web", `{"v":1,"ips":["192.0.2.300"]}`, `assignments/"web"`},
		{"assignments", "web", `garbage`, `assignments/"web"): not an edgelb record`},
		{"assignments", "web", `{"v":1,"ips":["192.0.2.9"]}`, `assignments/"web"): record without a checksum`},
	} {
		path := filepath.Join(t.TempDir(), "state.db")
		b, err := OpenBolt(path, BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			v := []byte(tc.value)
			if tc.value[0] == '{' && !strings.Contains(tc.want, "without a checksum") {
				v = frame(tc.key, v) // what edgelb would have written, checksum and all
			}
			return tx.Bucket([]byte(tc.bucket)).Put([]byte(tc.key), v)
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		b, err = OpenBolt(path, BoltOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Load()
		b.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s/%s = %s: error %v, want it to mention %s", tc.bucket, tc.key, tc.value, err, tc.want)
		} else {
			t.Logf("%s", err)
		}
	}
}

func TestBoltLockedBySecondProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = OpenBolt(path, BoltOptions{LockTimeout: 100 * time.Millisecond})
	if err == nil || !errors.Is(err, bolt.ErrTimeout) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second open: %v", err)
	}
}

func TestClosed(t *testing.T) {
	stores(t, func(t *testing.T, open func() Store) {
		s := open()
		s.Close()
		if _, err := s.Load(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Load after Close: %v", err)
		}
		if err := s.Commit(Change{DeletePools: []string{"x"}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Commit after Close: %v", err)
		}
	})
}

func TestMemFailCommits(t *testing.T) {
	m := NewMem()
	boom := errors.New("disk full")
	m.FailCommits(boom)
	if err := m.Commit(Change{PutServices: []Service{testService("a", OriginAPI)}}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	m.FailCommits(nil)
	if st, _ := m.Load(); len(st.Services) != 0 || m.Commits() != 0 {
		t.Fatal("failed commit changed the store")
	}
}

// TestLegacyStoreMigrated: a file written before records had checksums
// (schema 1, bare JSON records) opens, its records are framed in one
// transaction, and it loads the same; afterwards it is schema 2.
func TestLegacyStoreMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]map[string]string{
		"meta":        {"schema": "1"},
		"pools":       {"p": `{"v":1,"origin":"config","name":"p","ranges":["192.0.2.0/24"],"autoAssign":true,"avoidBuggyIPs":false,"advertisement":{}}`},
		"services":    {"web": `{"v":1,"origin":"api","spec":{"name":"web"}}`},
		"assignments": {"web": `{"v":1,"ips":["192.0.2.7"]}`},
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for b, kv := range recs {
			bk, err := tx.CreateBucket([]byte(b))
			if err != nil {
				return err
			}
			for k, v := range kv {
				if err := bk.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// edgelb check first: read-only, it reads the records as they are and
	// migrates nothing.
	before, _ := os.ReadFile(path)
	ro, err := OpenBoltReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rst, err := ro.Load()
	ro.Close()
	if after, _ := os.ReadFile(path); err != nil || !ro.Legacy || len(rst.Pools) != 1 || len(rst.Assignments) != 1 || !bytes.Equal(before, after) {
		t.Fatalf("read-only open of schema 1: legacy %v, %+v, %v; file unchanged %v", ro.Legacy, rst, err, bytes.Equal(before, after))
	}
	b, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated %d records; loaded %d pools, %d services, assignments %v", b.Migrated, len(st.Pools), len(st.Services), st.Assignments)
	if b.Migrated != 3 || len(st.Pools) != 1 || st.Services["web"].Origin != OriginAPI ||
		!reflect.DeepEqual(st.Assignments["web"], []netip.Addr{netip.MustParseAddr("192.0.2.7")}) {
		t.Fatalf("after migration: %+v", st)
	}
	b.Close()
	b, err = OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Migrated != 0 {
		t.Fatalf("migrated again: %d", b.Migrated)
	}
}

// TestBoltSortedCommitFillsPages: a first commit of many services (keys put
// in sorted order) fills its leaf pages instead of leaving each half empty
// (bbolt's default fill); the file stays readable and whole.
func TestBoltSortedCommitFillsPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var c Change
	for i := 0; i < n; i++ {
		s := testService(fmt.Sprintf("svc-%05d", i), OriginConfig)
		for j := 0; j < 10; j++ {
			s.Spec.Backends = append(s.Spec.Backends, lb.BackendSpec{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(j)}), Port: 8080, Weight: 1})
		}
		c.PutServices = append(c.PutServices, s)
	}
	if err := b.Commit(c); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var st bolt.BucketStats
	if err := db.View(func(tx *bolt.Tx) error {
		st = tx.Bucket(bucketServices).Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// In use over allocated: 0.48 with bbolt's default fill, 0.95 full.
	used := float64(st.LeafInuse) / float64(st.LeafAlloc)
	t.Logf("%d services: %d leaf pages, %d of %d bytes in use (%.2f)", st.KeyN, st.LeafPageN, st.LeafInuse, st.LeafAlloc, used)
	if st.KeyN != n || used < 0.85 {
		t.Fatalf("%d keys in %d leaf pages, %.2f of their bytes in use: want %d keys, ≥ 0.85 in use", st.KeyN, st.LeafPageN, used, n)
	}
	r, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Load()
	if err != nil || len(got.Services) != n {
		t.Fatalf("reloaded %d services, err %v; want %d", len(got.Services), err, n)
	}
	// Each record under its own name.
	for _, want := range c.PutServices {
		if g, ok := got.Services[want.Spec.Name]; !ok || !reflect.DeepEqual(g, want) {
			t.Fatalf("service %s reloaded as %+v, want %+v", want.Spec.Name, g, want)
		}
	}
}
