package webui

import (
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// securityHeaders: the page loads only its own assets and is never framed;
// API answers are not cached.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		if strings.HasPrefix(c.Path(), "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// crossOrigin refuses state-changing requests a browser sends on behalf of
// another site (Sec-Fetch-Site: cross-site, or an Origin that is not this
// host). The bearer token already stops them (a page elsewhere cannot read
// it from our sessionStorage); this is the second lock.
func (s *Server) crossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.cop.Check(c.Request()); err != nil {
			return apiErr(http.StatusForbidden, "cross-origin request refused: "+err.Error())
		}
		return next(c)
	}
}

// readBody enforces the JSON content type and the body size limit, then
// returns the body.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return nil, &APIError{Status: http.StatusUnsupportedMediaType,
			Message: "Content-Type must be application/json", Value: ct}
	}
	if r.ContentLength > s.opts.BodyLimit {
		return nil, &APIError{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("request body of %d bytes is larger than the limit of %d bytes", r.ContentLength, s.opts.BodyLimit)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, s.opts.BodyLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &APIError{Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("request body is larger than the limit of %d bytes", s.opts.BodyLimit)}
		}
		return nil, apiErr(http.StatusBadRequest, "reading the request body: "+err.Error())
	}
	return body, nil
}

// peerKey is the rate-limit identity: the address of the TCP peer. Headers
// such as X-Forwarded-For are set by the client and never trusted. IPv6
// peers are grouped by /64, the smallest block a host usually gets.
func peerKey(remoteAddr string) netip.Addr {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// limiter is a token bucket per peer.
type limiter struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[netip.Addr]*bucket
	lastSweep   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), buckets: map[netip.Addr]*bucket{}}
}

// allow takes a token for key; when none is left it says how long until one is.
func (l *limiter) allow(key netip.Addr, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Forget idle peers (a full bucket is the same as no bucket) so the map
	// stays the size of the recently active set.
	if now.Sub(l.lastSweep) > time.Minute {
		full := time.Duration(l.burst / l.rate * float64(time.Second))
		for k, b := range l.buckets {
			if now.Sub(b.last) > full {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.limiter == nil {
			return next(c)
		}
		ok, wait := s.limiter.allow(peerKey(c.Request().RemoteAddr), time.Now())
		if !ok {
			secs := int(math.Ceil(wait.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			return apiErr(http.StatusTooManyRequests, "too many requests from this address; retry later")
		}
		return next(c)
	}
}
