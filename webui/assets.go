package webui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"

	"github.com/labstack/echo/v4"
)

// The page and the API description ship inside the binary: no Node.js to
// build, no outside network to run.
//
//go:embed static openapi.json
var assets embed.FS

// staticRoutes registers one GET route per embedded file (index.html at /),
// so every route is explicit and appears in the OpenAPI document.
func (s *Server) staticRoutes(e *echo.Echo) {
	_ = fs.WalkDir(assets, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		route := "/" + path.Base(p)
		if route == "/index.html" {
			route = "/"
		}
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		e.GET(route, func(c echo.Context) error {
			c.Response().Header().Set("Cache-Control", "no-cache")
			return c.Blob(http.StatusOK, ct, body)
		})
		return nil
	})
}

func (s *Server) openapi(c echo.Context) error {
	b, err := assets.ReadFile("openapi.json")
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/json", b)
}
