package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Typed errors of a store shared by a fleet of gateways (etcd).
var (
	// ErrStale: another gateway committed since this one last loaded the
	// store; the change was not written. The engine reloads and retries.
	ErrStale = errors.New("the shared store changed since this gateway read it")
	// ErrUnavailable: the shared store cannot be reached, or the members
	// this gateway reaches have no quorum. Nothing was written (or, when a
	// request timed out, its outcome is unknown: the watch brings it in).
	ErrUnavailable = errors.New("the shared store (etcd) is unavailable")
	// ErrWatchBehind: the store has quorum, but the member this gateway
	// watches has not delivered a commit the quorum made a probe interval
	// ago (a member cut off from its peers); the watch is moved to another
	// member. Writes go on; what the gateway shows may lag meanwhile.
	ErrWatchBehind = errors.New("the shared store's watch is behind")
)

// Shared is a Store other gateways write too. Every Commit is guarded by
// the revision of the state the caller last loaded (ErrStale when another
// gateway committed since), and Changed signals that the store moved.
type Shared interface {
	Store
	// Changed receives a value when the store may have moved past the
	// state last loaded (a commit elsewhere, a watch that had to be
	// restarted, quorum regained); Behind says whether a Load is due.
	Changed() <-chan struct{}
	Behind() bool
	// Health is nil while the store answers with quorum and this
	// gateway's view keeps up with it; else why not: ErrUnavailable (no
	// quorum reached: writes are refused) or ErrWatchBehind. Either way
	// what the gateway shows may be stale.
	Health() error
	// Revision is the fleet-wide commit revision the caller's state was
	// loaded or committed at.
	Revision() int64
	// Fleet lists the gateways sharing the store, each at its revision.
	Fleet(ctx context.Context) ([]GatewayStatus, error)
}

// Keys under the prefix: pools/NAME, services/NAME, assignments/NAME with
// the same framed records as the bbolt file (integrity.go), meta/schema,
// and meta/commit, which every Commit rewrites: its mod revision is the
// fleet-wide version of the state. Guarding each record alone would not be
// enough: two gateways giving one free address to two different services
// write two different keys; guarding the one key every commit writes makes
// each commit start from the state the previous one left.
const (
	etcdKeyCommit = "meta/commit"
	etcdKeySchema = "meta/schema"
)

// EtcdOptions configure OpenEtcd.
type EtcdOptions struct {
	Endpoints []string
	TLS       *tls.Config // nil: plain http
	Prefix    string      // e.g. "/edgelb"; no trailing slash
	// Gateway names this gateway in meta/commit (who wrote last).
	Gateway string
	// Timeout bounds each request, its attempts included; zero means 2 s.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt of a request on one member before
	// it is sent again (etcdcall.go), doubled after each; zero means 500 ms.
	AttemptTimeout time.Duration
	// ProbeInterval is how often quorum is checked; zero means 1 s.
	ProbeInterval time.Duration
	// StartTimeout bounds the wait for the cluster in OpenEtcd (it fails
	// with ErrUnavailable after it, naming a TLS refusal); zero means 60 s.
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Etcd is the Store on an etcd cluster shared by a fleet of gateways.
type Etcd struct {
	cli     *clientv3.Client
	prefix  string // with a trailing "/"
	o       EtcdOptions
	log     *slog.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	changed chan struct{}

	mu   sync.Mutex // serialises Load and Commit (seen)
	seen int64      // meta/commit's mod revision in the caller's state

	latest atomic.Int64          // newest meta/commit mod revision the watch saw
	force  atomic.Bool           // a full Load is due whatever the revisions say
	rev    atomic.Int64          // seen, readable without mu (held across a Commit's round trip)
	health atomic.Pointer[error] // quorum: the probe's verdict (ErrUnavailable)
	behind atomic.Pointer[error] // the watch's: ErrWatchBehind (etcdwatch.go)
	token  atomic.Uint64         // Commit's tokens (meta/commit's value)

	// The watch (etcdwatch.go): watched is the revision up to which it has
	// delivered every event; stopWatch ends the current one (the loop
	// starts another, on whichever member the client picks).
	watched   atomic.Int64
	watchMu   sync.Mutex
	stopWatch context.CancelFunc
	probed    int64 // meta/commit's revision at the previous probe (probe goroutine)
	tlsErr    error // named TLS refusal while unavailable (probe goroutine)

	// Presence (etcdfleet.go), owned by the probe goroutine.
	lease     clientv3.LeaseID
	leaseLost atomic.Bool
	reported  int64
}

var _ Shared = (*Etcd)(nil)

// OpenEtcd connects, checks (or writes) the schema and starts the watch
// and the quorum probe. It waits up to StartTimeout for the cluster to
// answer, or until ctx ends (SIGTERM during start-up: the error wraps
// ctx's); once running, an unreachable cluster is a state the gateway runs
// in (forwarding what it has, writes refused) until it comes back.
func OpenEtcd(ctx context.Context, o EtcdOptions) (*Etcd, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 500 * time.Millisecond
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: o.Endpoints, TLS: o.TLS, DialTimeout: o.Timeout,
		// gRPC raises a keepalive time under 10 s to 10 s (and etcd
		// refuses pings more often than every 5 s): keepalive finds a
		// member that stopped answering at the TCP level, not one that
		// lost its peers; require-leader and attempts do that (etcdcall.go).
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: o.Timeout,
		Logger: zap.NewNop(),
		// gRPC's default reconnect backoff grows to 120 s: after a 30 s
		// outage the gateway took 9 s to write again once etcd was back.
		// Capped at 1 s, recovery is bounded by the quorum probe.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: o.Timeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store: %w", err)
	}
	s := &Etcd{cli: cli, prefix: strings.TrimSuffix(o.Prefix, "/") + "/", o: o, log: log, changed: make(chan struct{}, 1)}
	s.token.Store(rand.Uint64())
	down := fmt.Errorf("%w: not checked yet", ErrUnavailable)
	s.health.Store(&down)
	s.force.Store(true)
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// Wait for the cluster at start: without the fleet's state there is
	// nothing this gateway could serve or allocate correctly.
	deadline := time.Now().Add(o.StartTimeout)
	var said string
	for {
		rev, err := s.checkSchema(ctx)
		if err == nil {
			s.health.Store(nil)
			s.watched.Store(rev)
			break
		}
		if ctx.Err() != nil {
			cancel()
			cli.Close()
			return nil, fmt.Errorf("etcd store: start abandoned while waiting for the cluster: %w", ctx.Err())
		}
		if errors.Is(err, ErrUnavailable) {
			if terr := s.tlsProblem(ctx); terr != nil {
				err = s.unavailable(terr)
			}
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			cancel()
			cli.Close()
			return nil, err
		}
		if msg := err.Error(); msg != said {
			log.Warn("etcd store not reachable yet: waiting", "err", err)
			said = msg
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	s.wg.Add(2)
	go s.watch(bg)
	go s.probe(bg)
	return s, nil
}

func (s *Etcd) where() string {
	return "etcd " + strings.Join(s.o.Endpoints, ",") + " prefix " + s.prefix
}

// checkSchema writes meta/schema on an empty prefix, or refuses a newer
// one; it returns the store revision it read at (the watch starts there).
func (s *Etcd) checkSchema(ctx context.Context) (int64, error) {
	k := s.prefix + etcdKeySchema
	var resp *clientv3.TxnResponse
	err := s.call(ctx, func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, schema)).Else(clientv3.OpGet(k)).Commit()
		return err
	})
	if err != nil {
		return 0, s.unavailable(err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 1 && string(kvs[0].Value) != schema {
			return 0, &DamageError{Path: s.where(), Detail: fmt.Sprintf("schema version %q, this edgelb reads %q", kvs[0].Value, schema), Kind: ErrVersion}
		}
	}
	return resp.Header.Revision, nil
}

func (s *Etcd) unavailable(err error) error {
	return fmt.Errorf("%w (%s): %w", ErrUnavailable, strings.Join(s.o.Endpoints, ","), err)
}

// Load reads every record at one revision (a linearizable read: it needs
// quorum) and makes it the base of the next Commit.
func (s *Etcd) Load() (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Clear force first: a watch restart after this read forces another.
	force := s.force.Swap(false)
	var resp *clientv3.GetResponse
	err := s.call(context.Background(), func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
		return err
	})
	if err != nil {
		if force {
			s.force.Store(true)
		}
		return State{}, s.unavailable(err)
	}
	st := NewState()
	var seen int64
	for _, kv := range resp.Kvs {
		rel := strings.TrimPrefix(string(kv.Key), s.prefix)
		kind, name, _ := strings.Cut(rel, "/")
		if kind+"/" == etcdGateways {
			continue // presence, not state (etcdfleet.go)
		}
		if kind == "meta" {
			if rel == etcdKeyCommit {
				seen = kv.ModRevision
			}
			continue
		}
		var derr error
		var body []byte
		if body, derr = unframe(name, kv.Value); derr == nil {
			switch kind {
			case "pools":
				st.Pools[name], derr = decodePool(name, body)
			case "services":
				st.Services[name], derr = decodeService(name, body)
			case "assignments":
				st.Assignments[name], derr = decodeAssignment(body)
			default:
				derr = errors.New("unknown kind of record")
			}
		}
		if derr != nil {
			return State{}, &DamageError{Path: s.where(), Where: fmt.Sprintf("%s/%q", kind, name), Detail: derr.Error(), Kind: ErrDamaged}
		}
	}
	s.seen = seen
	s.rev.Store(seen)
	return st, nil
}

// Commit writes c in one transaction that succeeds only if meta/commit is
// still at the revision last loaded or committed: else ErrStale, nothing
// written.
func (s *Etcd) Commit(c Change) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("commit to store: %w", err)
	}
	if err := s.quorum(); err != nil {
		return err // fail at once, not after a timeout, while quorum is known lost
	}
	// One op per key (etcd refuses a key twice in a transaction): deletes
	// first, puts override, as Change says.
	ops := map[string]clientv3.Op{}
	del := func(kind, n string) { ops[kind+"/"+n] = clientv3.OpDelete(s.prefix + kind + "/" + n) }
	put := func(kind, n string, body []byte) {
		ops[kind+"/"+n] = clientv3.OpPut(s.prefix+kind+"/"+n, string(frame(n, body)))
	}
	for _, n := range c.DeletePools {
		del("pools", n)
	}
	for _, n := range c.DeleteServices {
		del("services", n)
	}
	for _, n := range c.DeleteAssignments {
		del("assignments", n)
	}
	for _, p := range c.PutPools {
		v, err := encodePool(p)
		if err != nil {
			return fmt.Errorf("pool %q: %w", p.Name, err)
		}
		put("pools", p.Name, v)
	}
	for _, sv := range c.PutServices {
		v, err := encodeService(sv)
		if err != nil {
			return fmt.Errorf("service %q: %w", sv.Spec.Name, err)
		}
		put("services", sv.Spec.Name, v)
	}
	for n, ips := range c.PutAssignments {
		if len(ips) == 0 {
			del("assignments", n)
			continue
		}
		v, err := encodeAssignment(ips)
		if err != nil {
			return fmt.Errorf("assignment %q: %w", n, err)
		}
		put("assignments", n, v)
	}
	list := make([]clientv3.Op, 0, len(ops)+1)
	for _, k := range Names(ops) {
		list = append(list, ops[k])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The token makes the commit recognisable: an attempt abandoned on a
	// member that could not answer (etcdcall.go) may still have applied;
	// the next attempt's guard then fails, and meta/commit holding this
	// token says the change is in.
	token := fmt.Sprintf("%s %016x", s.o.Gateway, s.token.Add(1))
	key := s.prefix + etcdKeyCommit
	list = append(list, clientv3.OpPut(key, token))
	var resp *clientv3.TxnResponse
	err := s.call(context.Background(), func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", s.seen)).
			Then(list...).Else(clientv3.OpGet(key)).Commit()
		return err
	})
	if err != nil {
		// Outcome unknown: if it was applied, the watch reports a commit
		// past seen and the engine reloads it.
		s.force.Store(true)
		s.notify()
		return fmt.Errorf("commit to store: %w", s.unavailable(err))
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 || string(kvs[0].Value) != token {
			s.force.Store(true)
			s.notify()
			return fmt.Errorf("commit to store: %w", ErrStale)
		}
		rev = kvs[0].ModRevision // an earlier attempt applied it
	}
	s.seen = rev
	s.rev.Store(rev)
	return nil
}

// Changed signals that a Load may be due (see Behind).
func (s *Etcd) Changed() <-chan struct{} { return s.changed }

// Behind reports whether the store moved past the state last loaded or
// committed (or a full relist is due: watch compacted or restarted).
func (s *Etcd) Behind() bool {
	s.mu.Lock()
	seen := s.seen
	s.mu.Unlock()
	return s.force.Load() || s.latest.Load() > seen
}

// Revision is meta/commit's revision in the state last loaded or
// committed: the fleet-wide version, equal on every gateway once converged.
func (s *Etcd) Revision() int64 { return s.rev.Load() }

func (s *Etcd) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Close stops the watch and the probe and closes the client.
func (s *Etcd) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.cli.Close()
}
