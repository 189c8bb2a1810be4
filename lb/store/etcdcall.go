package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Requests to the cluster. The client sends each request to the next
// member, round robin. A member cut off from its peers but still reachable
// by this gateway would hold every request it gets until that request's
// timeout: an isolated follower has no leader to forward a proposal to, an
// isolated leader cannot commit one (issue 35: 9-25 of ~870 writes
// acknowledged in 30 s). etcd's own mechanisms keep that short:
//   - every request says it needs a leader (clientv3.WithRequireLeader): a
//     member that knows it has none refuses at once (rpctypes.ErrNoLeader,
//     nothing done) and the request goes again, to the next member;
//   - until the member notices (one to two election timeouts), a request
//     it holds is abandoned after AttemptTimeout and sent again. Sending
//     again is safe: reads are reads, and a commit is guarded by
//     meta/commit's revision and carries a token, so at most one attempt
//     applies and a later attempt recognises an earlier one that did
//     (Commit).

// call runs f with the require-leader context until it succeeds, fails
// with an error another attempt would not change, or Timeout passed. Each
// attempt gets AttemptTimeout, doubled after each timed-out attempt (a
// large Load on a slow cluster is not cut off forever).
func (s *Etcd) call(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), s.o.Timeout)
	defer cancel()
	per := s.o.AttemptTimeout
	for {
		actx, acancel := context.WithTimeout(ctx, per)
		err := f(actx)
		timedOut := actx.Err() != nil
		acancel()
		if err == nil || ctx.Err() != nil || !(timedOut || transient(err)) {
			return err
		}
		if timedOut {
			per *= 2
			continue
		}
		// Refused at once (no leader: an election, or the member is
		// isolated): a short pause so that a cluster electing a leader is
		// not asked in a tight loop.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// transient: the member could not serve the request now (no leader,
// leader changed, a request that timed out inside etcd, no connection);
// another member, or the same one later, may.
func transient(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// TLSError is a member that refused this gateway's TLS, or whose
// certificate this gateway refused. The etcd client reports either only as
// a request that never got an answer ("context deadline exceeded"): gRPC
// keeps the handshake's error to itself while it retries.
type TLSError struct {
	Endpoint string
	Err      error
}

func (e *TLSError) Error() string { return fmt.Sprintf("etcd at %s: TLS: %v", e.Endpoint, e.Err) }
func (e *TLSError) Unwrap() error { return e.Err }

// tlsProblem shakes hands with every member the client speaks TLS to (an
// https:// endpoint, or one without a scheme when TLS is configured, as the
// client decides) with the client's own TLS settings, and returns the
// first refusal. A member that cannot be reached at all is not a TLS
// problem (nil for it).
func (s *Etcd) tlsProblem(ctx context.Context) error {
	for _, ep := range s.o.Endpoints {
		host, secure := endpointHost(ep, s.o.TLS != nil)
		if !secure {
			continue
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.o.TLS != nil {
			cfg = s.o.TLS.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(host)
		}
		cfg.NextProtos = []string{"h2"}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
		if err != nil {
			cancel()
			continue // unreachable: said elsewhere
		}
		tc := tls.Client(conn, cfg)
		err = tc.HandshakeContext(dctx)
		if err == nil {
			// TLS 1.3: the member checks this gateway's certificate after
			// the client's side of the handshake is done; a refusal comes
			// as an alert on the first read.
			_ = tc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err = tc.Read(make([]byte, 1))
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "remote error" {
				err = nil // data, a timeout or a close: no refusal
			}
		}
		cancel()
		tc.Close()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
			return &TLSError{Endpoint: ep, Err: err}
		}
	}
	return nil
}

// endpointHost is an endpoint's host:port and whether the client speaks
// TLS to it (clientv3: https and unixs always, http never, no scheme when
// TLS is configured).
func endpointHost(ep string, tlsConfigured bool) (string, bool) {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return ep, tlsConfigured
	}
	switch u.Scheme {
	case "https":
		return u.Host, true
	case "http", "unix", "unixs":
		return u.Host, false // unixs: not a TCP address to shake hands with
	}
	return u.Host, tlsConfigured
}
