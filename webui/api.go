package webui

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/edgelb/edgelb/lb"
)

func (s *Server) sendJSON(c echo.Context, status int, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(status, "application/json", b)
}

func (s *Server) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

func (s *Server) readyz(c echo.Context) error {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(c.Request().Context()); err != nil {
			return apiErr(http.StatusServiceUnavailable, "not ready: "+err.Error())
		}
	}
	if f := s.opts.StoreTrouble; f != nil {
		if err := f(); err != nil {
			return c.String(http.StatusOK, "ready\nwarning: writes fail: "+strings.ReplaceAll(err.Error(), "\n", " ")+"\n")
		}
	}
	return c.String(http.StatusOK, "ready\n")
}

// ---- pools ----

func (s *Server) listPools(c echo.Context) error {
	ps, err := s.opts.Manager.Pools(c.Request().Context())
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, poolStatuses(ps))
}

func (s *Server) getPool(c echo.Context) error {
	p, err := s.opts.Manager.Pool(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, poolStatusOf(p))
}

func (s *Server) decodePool(c echo.Context) (lb.Pool, error) {
	body, err := s.readBody(c)
	if err != nil {
		return lb.Pool{}, err
	}
	var dto PoolSpec
	if err := lb.DecodeStrict(body, &dto); err != nil {
		return lb.Pool{}, err
	}
	return parsePool(dto)
}

func (s *Server) createPool(c echo.Context) error {
	p, err := s.decodePool(c)
	if err != nil {
		return err
	}
	st, err := s.opts.Manager.CreatePool(c.Request().Context(), p)
	if err != nil {
		return err
	}
	s.changed()
	c.Response().Header().Set("Location", "/api/v1/pools/"+st.Name)
	return s.sendJSON(c, http.StatusCreated, poolStatusOf(st))
}

// nameMatches: the path names the object; a body may repeat the name but
// not contradict it (renaming is delete + create).
func nameMatches(path, body string) error {
	if body != path {
		return &lb.FieldError{Field: "name", Value: body, Err: errNameMismatch(path)}
	}
	return nil
}

type errNameMismatch string

func (e errNameMismatch) Error() string {
	return "must equal the name in the URL, " + strconv.Quote(string(e)) + " (rename by delete and create)"
}

func (s *Server) updatePool(c echo.Context) error {
	p, err := s.decodePool(c)
	if err != nil {
		return err
	}
	if err := nameMatches(c.Param("name"), p.Name); err != nil {
		return err
	}
	st, err := s.opts.Manager.UpdatePool(c.Request().Context(), p)
	if err != nil {
		return err
	}
	s.changed()
	return s.sendJSON(c, http.StatusOK, poolStatusOf(st))
}

func (s *Server) deletePool(c echo.Context) error {
	if err := s.opts.Manager.DeletePool(c.Request().Context(), c.Param("name")); err != nil {
		return err
	}
	s.changed()
	return c.NoContent(http.StatusNoContent)
}

// ---- services ----

func (s *Server) listServices(c echo.Context) error {
	ss, err := s.opts.Manager.Services(c.Request().Context())
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, serviceStatuses(ss))
}

func (s *Server) getService(c echo.Context) error {
	st, err := s.opts.Manager.Service(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return s.sendJSON(c, http.StatusOK, serviceStatusOf(st))
}

func (s *Server) putService(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var dto ServiceSpec
	if err := lb.DecodeStrict(body, &dto); err != nil {
		return err
	}
	spec, err := parseService(dto)
	if err != nil {
		return asWritten(&dto, err)
	}
	if err := nameMatches(c.Param("name"), spec.Name); err != nil {
		return err
	}
	st, created, err := s.opts.Manager.PutService(c.Request().Context(), spec)
	if err != nil {
		return asWritten(&dto, err)
	}
	s.changed()
	code := http.StatusOK
	if created {
		code = http.StatusCreated
		c.Response().Header().Set("Location", "/api/v1/services/"+spec.Name)
	}
	return s.sendJSON(c, code, serviceStatusOf(st))
}

func (s *Server) deleteService(c echo.Context) error {
	if err := s.opts.Manager.DeleteService(c.Request().Context(), c.Param("name")); err != nil {
		return err
	}
	s.changed()
	return c.NoContent(http.StatusNoContent)
}

// ---- live state ----

// FlowList is GET /api/v1/flows.
type FlowList struct {
	// Total counts the live flows matching the filter; Flows holds the
	// newest `limit` of them.
	Total int    `json:"total"`
	Flows []Flow `json:"flows"`
}

func (s *Server) listFlows(c echo.Context) error {
	limit := 1000
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100000 {
			return &lb.FieldError{Field: "limit", Value: v, Err: errRange("an integer 0..100000")}
		}
		limit = n
	}
	fe := c.QueryParam("frontend")
	if fe != "" {
		ap, err := netip.ParseAddrPort(fe)
		if err != nil {
			return &lb.FieldError{Field: "frontend", Value: fe, Err: errRange("ADDRESS:PORT, e.g. 192.0.2.10:80 or [2001:db8::10]:80")}
		}
		fe = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	s.hub.freshen(c.Request().Context())
	total, flows := s.hub.flowList(fe, limit)
	return s.sendJSON(c, http.StatusOK, FlowList{Total: total, Flows: flows})
}

type errRange string

func (e errRange) Error() string { return "want " + string(e) }

func (s *Server) getStats(c echo.Context) error {
	s.hub.freshen(c.Request().Context())
	return s.sendJSON(c, http.StatusOK, s.hub.stats())
}

func (s *Server) getAnnounce(c echo.Context) error {
	return s.sendJSON(c, http.StatusOK, announceStatuses(s.opts.Reporters))
}
