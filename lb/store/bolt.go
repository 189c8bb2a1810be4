package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// schema is the layout version of the file (buckets and keys); records
// carry their own version.
const schema = "1"

// Bolt is the Store on an embedded bbolt file.
type Bolt struct {
	path string
	mu   sync.Mutex // guards db against Close racing a Commit
	db   *bolt.DB
}

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// LockTimeout bounds the wait for the file lock another process holds
	// (a second edgelb on the same state). Zero means 5 s.
	LockTimeout time.Duration
}

// OpenBolt opens (creating if needed) the state file at path.
func OpenBolt(path string, o BoltOptions) (*Bolt, error) {
	if o.LockTimeout == 0 {
		o.LockTimeout = 5 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.LockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open store %s: locked by another process (another edgelb running?): %w", path, err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketPools, bucketServices, bucketAssignments} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		switch v := m.Get(keySchema); {
		case v == nil:
			return m.Put(keySchema, []byte(schema))
		case string(v) != schema:
			return fmt.Errorf("schema version %q, this edgelb reads %q", v, schema)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Bolt{path: path, db: db}, nil
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
	err := b.db.View(func(tx *bolt.Tx) error {
		each := func(bucket []byte, fn func(k string, v []byte) error) error {
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				if err := fn(string(k), v); err != nil {
					return fmt.Errorf("corrupt record %s/%q: %w", bucket, k, err)
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
	})
	if err != nil {
		return State{}, fmt.Errorf("load store %s: %w", b.path, err)
	}
	return st, nil
}

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
	err := b.db.Update(func(tx *bolt.Tx) error {
		pools, svcs, asg := tx.Bucket(bucketPools), tx.Bucket(bucketServices), tx.Bucket(bucketAssignments)
		for _, n := range c.DeletePools {
			if err := pools.Delete([]byte(n)); err != nil {
				return err
			}
		}
		for _, n := range c.DeleteServices {
			if err := svcs.Delete([]byte(n)); err != nil {
				return err
			}
		}
		for _, n := range c.DeleteAssignments {
			if err := asg.Delete([]byte(n)); err != nil {
				return err
			}
		}
		for _, p := range c.PutPools {
			v, err := encodePool(p)
			if err == nil {
				err = pools.Put([]byte(p.Name), v)
			}
			if err != nil {
				return fmt.Errorf("pool %q: %w", p.Name, err)
			}
		}
		for _, s := range c.PutServices {
			v, err := encodeService(s)
			if err == nil {
				err = svcs.Put([]byte(s.Spec.Name), v)
			}
			if err != nil {
				return fmt.Errorf("service %q: %w", s.Spec.Name, err)
			}
		}
		for n, ips := range c.PutAssignments {
			if len(ips) == 0 {
				if err := asg.Delete([]byte(n)); err != nil {
					return err
				}
				continue
			}
			v, err := encodeAssignment(ips)
			if err == nil {
				err = asg.Put([]byte(n), v)
			}
			if err != nil {
				return fmt.Errorf("assignment %q: %w", n, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit to store %s: %w", b.path, err)
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
