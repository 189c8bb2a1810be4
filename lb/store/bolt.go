package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketMeta        = []byte("meta")
	bucketPools       = []byte("pools")
	bucketServices    = []byte("services")
	bucketAssignments = []byte("assignments")
	keySchema         = []byte("schema")
)

// schema is the layout version of the file (buckets, keys, record
// framing); records carry their own version. "1": records without
// checksums; "2": every record framed with its checksum (integrity.go). A
// file at "1" is migrated when opened.
const (
	schema       = "2"
	legacySchema = "1"
)

// Bolt is the Store on an embedded bbolt file.
type Bolt struct {
	path string
	mu   sync.Mutex // guards db against Close racing a Commit
	db   *bolt.DB
	// Migrated is how many records OpenBolt framed with a checksum (a file
	// written before checksums); the daemon logs it.
	Migrated int
	// Legacy: opened read-only at schema 1 (records without checksums, not
	// migrated: a read-only open writes nothing). Load reads its unframed
	// records as they are, as the migration will; `edgelb check` says so.
	Legacy bool
}

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// LockTimeout bounds the wait for the file lock another process holds
	// (a second edgelb on the same state). Zero means 5 s.
	LockTimeout time.Duration
}

// initialMmap maps the state file this far ahead: address space, not
// memory (only the pages read count in RSS). bbolt remaps as the file grows,
// and each remap first copies out of the old mapping every node the write
// transaction holds: the first load of 10,000 services remapped ~10 times,
// a fifth of the load's time (BenchmarkSyncConfigBolt: 10,000 services
// 139-165 → 113-116 ms, 50,000 924-1001 → 668-725 ms). etcd maps 10 GiB
// ahead by default; 32-bit builds keep bbolt's own growth. With the larger
// map bbolt grows the file ahead of its data in 16 MiB steps (AllocSize),
// sparse: `ls -l` shows 16 MiB for a handful of services, `du` the 24 KiB
// written; damage is judged against the data's extent (TestStoreDamageTable).
const initialMmap = (1 << 30) * (strconv.IntSize / 64)

// OpenBolt opens (creating if needed) the state file at path.
func OpenBolt(path string, o BoltOptions) (*Bolt, error) {
	if o.LockTimeout == 0 {
		o.LockTimeout = 5 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var db *bolt.DB
	err := guard(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.LockTimeout, InitialMmapSize: initialMmap})
		return err
	})
	if err != nil {
		return nil, openError(path, err)
	}
	migrated := 0
	err = guard(path, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketMeta, bucketPools, bucketServices, bucketAssignments} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			m := tx.Bucket(bucketMeta)
			switch v := m.Get(keySchema); {
			case v == nil:
				return m.Put(keySchema, []byte(schema))
			case string(v) == legacySchema:
				var err error
				if migrated, err = migrateLegacy(tx); err != nil {
					return err
				}
				return m.Put(keySchema, []byte(schema))
			case string(v) != schema:
				return &DamageError{Path: path, Detail: fmt.Sprintf("schema version %q, this edgelb reads %q", v, schema), Kind: ErrVersion}
			}
			return nil
		})
	})
	if err != nil {
		guard(path, db.Close)
		return nil, openError(path, err)
	}
	return &Bolt{path: path, db: db, Migrated: migrated}, nil
}

// OpenBoltReadOnly opens an existing state file for reading only (`edgelb
// check`): nothing is created, migrated or written, and the daemon's lock is
// waited for at most lockTimeout.
func OpenBoltReadOnly(path string, lockTimeout time.Duration) (*Bolt, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var db *bolt.DB
	legacy := false
	err := guard(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: true})
		return err
	})
	if err != nil {
		return nil, openError(path, err)
	}
	err = guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			m := tx.Bucket(bucketMeta)
			if m == nil {
				return &DamageError{Path: path, Detail: "no meta bucket", Kind: ErrDamaged}
			}
			if v := m.Get(keySchema); string(v) != schema {
				if string(v) == legacySchema {
					legacy = true
					return nil
				}
				return &DamageError{Path: path, Detail: fmt.Sprintf("schema version %q, this edgelb reads %q", v, schema), Kind: ErrVersion}
			}
			return nil
		})
	})
	if err != nil {
		guard(path, db.Close)
		return nil, openError(path, err)
	}
	return &Bolt{path: path, db: db, Legacy: legacy}, nil
}

// openError classifies what bbolt said about a file it could not open.
func openError(path string, err error) error {
	var de *DamageError
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, bolt.ErrTimeout):
		return fmt.Errorf("open store %s: locked by another process (another edgelb running?): %w", path, err)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrChecksum), errors.Is(err, bolt.ErrVersionMismatch),
		errors.Is(err, bolt.ErrInvalidMapping):
		return &DamageError{Path: path, Detail: err.Error(), Kind: ErrDamaged}
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// migrateLegacy frames every record written before checksums (schema 1),
// in the transaction that marks the file schema 2. Their content is taken
// as it is: nothing could check it before either.
func migrateLegacy(tx *bolt.Tx) (int, error) {
	n := 0
	for _, name := range [][]byte{bucketPools, bucketServices, bucketAssignments} {
		b := tx.Bucket(name)
		var keys, vals [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			if len(v) > 0 && v[0] == '{' {
				keys, vals = append(keys, append([]byte(nil), k...)), append(vals, append([]byte(nil), v...))
			}
			return nil
		}); err != nil {
			return 0, err
		}
		for i, k := range keys {
			if err := b.Put(k, frame(string(k), vals[i])); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// Path is the file the store lives in.
func (b *Bolt) Path() string { return b.path }

// Load reads every record.
func (b *Bolt) Load() (State, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.db == nil {
		return State{}, ErrClosed
	}
	st := NewState()
	err := guard(b.path, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			return b.load(tx, st)
		})
	})
	if err != nil {
		var de *DamageError
		if errors.As(err, &de) {
			return State{}, err
		}
		return State{}, fmt.Errorf("load store %s: %w", b.path, err)
	}
	return st, nil
}

func (b *Bolt) load(tx *bolt.Tx, st State) error {
	{
		each := func(bucket []byte, fn func(k string, v []byte) error) error {
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				body, err := unframe(string(k), v)
				if b.Legacy && len(v) > 0 && v[0] == '{' {
					body, err = v, nil // schema 1, read-only: as migrateLegacy will take it
				}
				if err == nil {
					err = fn(string(k), body)
				}
				if err != nil {
					return &DamageError{Path: b.path, Where: fmt.Sprintf("%s/%q", bucket, k), Detail: err.Error(), Kind: ErrDamaged}
				}
				return nil
			})
		}
		if err := each(bucketPools, func(k string, v []byte) error {
			p, err := decodePool(k, v)
			st.Pools[k] = p
			return err
		}); err != nil {
			return err
		}
		if err := each(bucketServices, func(k string, v []byte) error {
			s, err := decodeService(k, v)
			st.Services[k] = s
			return err
		}); err != nil {
			return err
		}
		return each(bucketAssignments, func(k string, v []byte) error {
			ips, err := decodeAssignment(v)
			st.Assignments[k] = ips
			return err
		})
	}
}

// sortedBy returns recs ordered by key. A bbolt transaction inserts each
// key into a node held in memory until commit, shifting every key after it:
// keys in random order cost O(n²) (a start with 50,000 services spent 1.7 s
// in node.put), keys in order append.
func sortedBy[T any](recs []T, key func(*T) string) []*T {
	// Pointers, not copies: 10,000 services' structs were ~5 MB of fresh
	// heap on a first start, each page of it a page fault (issue 18).
	out := make([]*T, len(recs))
	for i := range recs {
		out[i] = &recs[i]
	}
	slices.SortFunc(out, func(a, b *T) int { return strings.Compare(key(a), key(b)) })
	return out
}

// fillPercent is how full bbolt fills a page before it splits it. Commit
// puts keys in sorted order, and with bbolt's default (0.5) sorted puts
// leave every page half empty: a first start at 10,000 services × 10
// backends wrote 5,000 leaf pages of two ~730-byte records each (20 MB,
// every page a 4 KiB buffer the commit allocates and writes) where 2,000
// would hold them (issue 18: start-up). Full pages suit this store: after
// the first commit most puts rewrite a record with one of the same size,
// in place; a put that overflows a page splits it as any B-tree does.
const fillPercent = 1.0

// Commit applies c in one bbolt transaction: all of it or nothing.
func (b *Bolt) Commit(c Change) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("commit to store: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.db == nil {
		return ErrClosed
	}
	err := guard(b.path, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			pools, svcs, asg := tx.Bucket(bucketPools), tx.Bucket(bucketServices), tx.Bucket(bucketAssignments)
			pools.FillPercent, svcs.FillPercent, asg.FillPercent = fillPercent, fillPercent, fillPercent
			for _, n := range slices.Sorted(slices.Values(c.DeletePools)) {
				if err := pools.Delete([]byte(n)); err != nil {
					return err
				}
			}
			for _, n := range slices.Sorted(slices.Values(c.DeleteServices)) {
				if err := svcs.Delete([]byte(n)); err != nil {
					return err
				}
			}
			for _, n := range slices.Sorted(slices.Values(c.DeleteAssignments)) {
				if err := asg.Delete([]byte(n)); err != nil {
					return err
				}
			}
			for _, p := range sortedBy(c.PutPools, func(p *Pool) string { return p.Name }) {
				v, err := encodePool(*p)
				if err == nil {
					err = pools.Put([]byte(p.Name), frame(p.Name, v))
				}
				if err != nil {
					return fmt.Errorf("pool %q: %w", p.Name, err)
				}
			}
			for _, s := range sortedBy(c.PutServices, func(s *Service) string { return s.Spec.Name }) {
				v, err := encodeService(*s)
				if err == nil {
					err = svcs.Put([]byte(s.Spec.Name), frame(s.Spec.Name, v))
				}
				if err != nil {
					return fmt.Errorf("service %q: %w", s.Spec.Name, err)
				}
			}
			for _, n := range slices.Sorted(maps.Keys(c.PutAssignments)) {
				ips := c.PutAssignments[n]
				if len(ips) == 0 {
					if err := asg.Delete([]byte(n)); err != nil {
						return err
					}
					continue
				}
				v, err := encodeAssignment(ips)
				if err == nil {
					err = asg.Put([]byte(n), frame(n, v))
				}
				if err != nil {
					return fmt.Errorf("assignment %q: %w", n, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("commit to store %s: %w", b.path, commitError(b.path, err))
	}
	return nil
}

// Close releases the file (and its lock).
func (b *Bolt) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.db == nil {
		return nil
	}
	err := b.db.Close()
	b.db = nil
	return err
}
