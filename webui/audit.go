package webui

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/audit"
)

// AuditSource is the audit trail GET /api/v1/audit serves (*audit.Log).
type AuditSource interface {
	Entries(limit int) []audit.Entry
}

// AuditList is GET /api/v1/audit: the newest entries first.
type AuditList struct {
	Entries []audit.Entry `json:"entries"`
}

func (s *Server) getAudit(c echo.Context) error {
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.DefaultKeep {
			return &lb.FieldError{Field: "limit", Value: v, Err: errRange("an integer 1..1000")}
		}
		limit = n
	}
	out := AuditList{Entries: []audit.Entry{}}
	if s.opts.Audit != nil {
		out.Entries = append(out.Entries, s.opts.Audit.Entries(limit)...)
	}
	return s.sendJSON(c, http.StatusOK, out)
}
