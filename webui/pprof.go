package webui

import (
	"net/http"
	"net/http/pprof"

	"github.com/labstack/echo/v4"
)

// pprofRoutes serves Go's profiles under /debug/pprof/ (heap, profile,
// goroutine, allocs, trace...), as kube-proxy does with --profiling, so an
// operator can see where a gateway's memory and CPU go (issue 18: "measure
// with pprof"). Unlike kube-proxy's they need the API token: a CPU profile
// or a trace costs CPU for its duration, and the rate limit applies.
func (s *Server) pprofRoutes(e *echo.Echo) {
	add := func(path string, h http.HandlerFunc) {
		e.GET("/debug/pprof"+path, echo.WrapHandler(h), s.rateLimit, s.requireToken)
	}
	add("/", pprof.Index)
	add("/:name", pprof.Index) // named profiles: heap, allocs, goroutine, block, mutex, threadcreate
	add("/cmdline", pprof.Cmdline)
	add("/profile", pprof.Profile)
	add("/symbol", pprof.Symbol)
	add("/trace", pprof.Trace)
}
