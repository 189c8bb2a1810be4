package webui

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/edgelb/edgelb/lb/audit"
)

// Role is what a token may do: RoleRead reads (everything but writes),
// RoleWrite reads and writes.
type Role string

const (
	RoleRead  Role = "read"
	RoleWrite Role = "write"
)

// Token is one named API credential (config api.tokens). The name is the
// identity the audit trail records; the secret never leaves the server.
type Token struct {
	Name   string
	Secret string
	Role   Role
}

// LegacyTokenName names the single write token of Options.Token (config
// api.tokenFile) in the audit trail.
const LegacyTokenName = "default"

type credential struct {
	name string
	hash [sha256.Size]byte
	role Role
}

// credentials hashes the tokens once; Options.Token joins them as a write
// token named LegacyTokenName.
func credentials(o *Options) []credential {
	var out []credential
	add := func(name, secret string, role Role) {
		if secret != "" {
			out = append(out, credential{name: name, hash: sha256.Sum256([]byte(secret)), role: role})
		}
	}
	if o.Token != "" {
		add(LegacyTokenName, o.Token, RoleWrite)
	}
	for _, t := range o.Tokens {
		add(t.Name, t.Secret, t.Role)
	}
	return out
}

// loopbackOnly reports whether listen (host:port) accepts connections from
// this host only. An unspecified address (":8080", "0.0.0.0", "::") or a
// name other than localhost listens beyond.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// ReadsNeedToken reports whether reads need a token on listen: whenever it
// is beyond loopback, unless anonymous reads are asked for.
func ReadsNeedToken(listen string, anonymousReads bool) bool {
	return !anonymousReads && !loopbackOnly(listen)
}

// identify checks "Authorization: Bearer TOKEN" against every credential.
// Both sides are SHA-256 hashed first so the comparison takes the same time
// whatever the length or content of the guess, and every credential is
// compared (no early exit) so the time does not tell which one matched.
func (s *Server) identify(c echo.Context) (*credential, *APIError) {
	auth := c.Request().Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return nil, apiErr(http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	var found *credential
	for i := range s.creds {
		if subtle.ConstantTimeCompare(sum[:], s.creds[i].hash[:]) == 1 {
			found = &s.creds[i]
		}
	}
	if found == nil {
		return nil, apiErr(http.StatusUnauthorized, "invalid bearer token")
	}
	return found, nil
}

// requireRead guards every read of state (pools, services, flows, stats,
// the stream, /metrics, announce, audit...): open on a loopback listen or
// with anonymous reads, else any valid token.
func (s *Server) requireRead(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.readsNeedToken {
			return next(c)
		}
		if _, err := s.identify(c); err != nil {
			if err.Message != "invalid bearer token" {
				err.Message += " (reads need a token when the API listens beyond loopback: api.tokens with role read, or api.anonymousReads: true)"
			}
			return err
		}
		return next(c)
	}
}

// requireToken lets a write through only with a write token, and hands the
// token's name and the peer's address to the writer (the audit trail).
func (s *Server) requireToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.canWrite {
			return apiErr(http.StatusForbidden, "writes are disabled: edgelb has no API token with role write configured")
		}
		cred, err := s.identify(c)
		if err != nil {
			return err
		}
		if cred.role != RoleWrite {
			return apiErr(http.StatusForbidden, "token "+strconv.Quote(cred.name)+" may only read (role read); writes need a token with role write")
		}
		r := c.Request()
		a := audit.Actor{Identity: cred.name, Source: "rest", Client: peerAddr(r.RemoteAddr)}
		c.SetRequest(r.WithContext(audit.WithActor(r.Context(), a)))
		return next(c)
	}
}

func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
