package webui

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// Headers on every answer of a gateway whose state lives in a store shared
// by a fleet (etcd): the store revision it has applied, and, while the
// store is unreachable or without quorum, that what it shows may be stale
// (writes meanwhile are refused with 503: errors.go).
const (
	HeaderStoreRevision = "X-Edgelb-Store-Revision"
	HeaderStale         = "X-Edgelb-Stale"
)

func (s *Server) fleetHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if f := s.opts.StoreRevision; f != nil {
			h.Set(HeaderStoreRevision, strconv.FormatInt(f(), 10))
		}
		if f := s.opts.StoreHealth; f != nil {
			if err := f(); err != nil {
				// One line: a header value cannot hold a newline.
				h.Set(HeaderStale, "may be stale: "+strings.ReplaceAll(err.Error(), "\n", " "))
			}
		}
		return next(c)
	}
}
