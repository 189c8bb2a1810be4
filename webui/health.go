package webui

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// BackendHealth is one backend under active health checks (GET /api/v1/health).
type BackendHealth struct {
	Service     string    `json:"service"`
	Backend     string    `json:"backend"`
	Healthy     bool      `json:"healthy"`
	Since       time.Time `json:"since"`
	LastError   string    `json:"lastError,omitempty"`
	Checks      uint64    `json:"checks"`
	Failures    uint64    `json:"failures"`
	Transitions uint64    `json:"transitions"`
}

// getHealth lists the checked backends (standalone services' healthCheck,
// Kubernetes nodeport mode's nodeHealthCheck); without Options.Health, or
// with nothing under check, the list is empty. The page polls it.
func (s *Server) getHealth(c echo.Context) error {
	out := []BackendHealth{}
	if s.opts.Health != nil {
		out = append(out, s.opts.Health()...)
	}
	return s.sendJSON(c, http.StatusOK, out)
}
