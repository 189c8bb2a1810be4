package webui

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/edgelb/edgelb/lb/store"
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

// fleetView is GET /api/v1/fleet: this gateway's revision and health, and
// every gateway that reports itself in the shared store.
type fleetView struct {
	Gateway  string                `json:"gateway"`
	Revision int64                 `json:"revision"`
	Stale    string                `json:"stale,omitempty"`
	Gateways []store.GatewayStatus `json:"gateways"`
}

func (s *Server) getFleet(c echo.Context) error {
	if s.opts.Fleet == nil {
		return &APIError{Status: http.StatusNotFound, Message: "this gateway is not part of a fleet (state.type is not etcd)"}
	}
	v := fleetView{Gateway: s.opts.FleetName, Gateways: []store.GatewayStatus{}}
	if f := s.opts.StoreRevision; f != nil {
		v.Revision = f()
	}
	if f := s.opts.StoreHealth; f != nil {
		if err := f(); err != nil {
			v.Stale = err.Error()
		}
	}
	gws, err := s.opts.Fleet(c.Request().Context())
	if err != nil {
		return err // ErrUnavailable: 503
	}
	v.Gateways = append(v.Gateways, gws...)
	return s.sendJSON(c, http.StatusOK, v)
}
