package webui

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// APIError is every error body the API sends:
// {"error": "...", "field": "addresses[0]", "value": "192.0.2.0/33"}.
// Bad input names its first problem in field and value and lists every
// problem in errors (lb's validator reports them all at once).
type APIError struct {
	Status  int             `json:"-"`
	Message string          `json:"error"`
	Field   string          `json:"field,omitempty"`
	Value   string          `json:"value,omitempty"`
	Errors  []APIFieldError `json:"errors,omitempty"`
}

// APIFieldError is one problem of a refused body.
type APIFieldError struct {
	Message string `json:"error"`
	Field   string `json:"field"`
	Value   string `json:"value,omitempty"`
}

// allUnsupported: every problem is one the running dataplane cannot do
// (422); any other makes the body bad input (400).
func allUnsupported(err error) bool {
	var list *lb.Errors
	if errors.As(err, &list) {
		for _, fe := range list.List {
			if !errors.Is(fe, proxy.ErrUnsupported) {
				return false
			}
		}
		return len(list.List) > 0
	}
	return errors.Is(err, proxy.ErrUnsupported)
}

// fieldErrors lists every problem err holds when there is more than one.
func fieldErrors(err error) []APIFieldError {
	var list *lb.Errors
	if !errors.As(err, &list) || len(list.List) < 2 {
		return nil
	}
	out := make([]APIFieldError, len(list.List))
	for i, fe := range list.List {
		out[i] = APIFieldError{Message: fe.Error(), Field: fe.Field, Value: fe.Value}
	}
	return out
}

func (e *APIError) Error() string { return e.Message }

func apiErr(status int, msg string) *APIError { return &APIError{Status: status, Message: msg} }

// toAPIError maps typed errors to statuses: bad input 400, what the
// running dataplane cannot do 422, unknown name 404, clashes with current
// state 409, the state store could not save it 507 (disk full) or 503; anything else is ours (500) and its
// text is logged, not sent.
func toAPIError(err error, log *slog.Logger) *APIError {
	var ae *APIError
	var fe *lb.FieldError
	var ce *lb.ConflictError
	var he *echo.HTTPError
	var mbe *http.MaxBytesError
	var sce *store.CommitError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe) && allUnsupported(err):
		// Well-formed, but the running dataplane cannot do it (lc on
		// nftables): 422, naming the field; nothing was stored.
		return &APIError{Status: http.StatusUnprocessableEntity, Message: fe.Error(), Field: fe.Field, Value: fe.Value, Errors: fieldErrors(err)}
	case errors.As(err, &fe):
		return &APIError{Status: http.StatusBadRequest, Message: fe.Error(), Field: fe.Field, Value: fe.Value, Errors: fieldErrors(err)}
	case errors.As(err, &ce):
		return &APIError{Status: http.StatusConflict, Message: ce.Reason, Field: ce.Field, Value: ce.Value}
	case errors.Is(err, store.ErrUnavailable):
		// A fleet's shared store without quorum: nothing is written, what
		// is programmed keeps forwarding.
		return &APIError{Status: http.StatusServiceUnavailable, Message: "not written: " + err.Error() +
			"; forwarding of what is programmed goes on, try again when the store is back"}
	case errors.As(err, &sce):
		// The state file could not be written: nothing changed. A full
		// disk is 507 (Insufficient Storage), anything else 503; the body
		// says which, and so do edgelb_store_commit_failures_total{reason}
		// and /readyz.
		status := http.StatusServiceUnavailable
		if sce.Reason == store.ReasonDiskFull {
			status = http.StatusInsufficientStorage
		}
		return &APIError{Status: status, Field: "store", Value: string(sce.Reason), Message: "not written: " + sce.Error() +
			"; nothing changed, forwarding of what is programmed goes on; free space (or fix the disk) and try again"}
	case errors.Is(err, store.ErrStale):
		// Other gateways' writes kept winning the race for the fleet's store.
		return &APIError{Status: http.StatusServiceUnavailable, Message: "not written: " + err.Error() +
			" (other gateways kept writing first); try again"}
	case errors.Is(err, lb.ErrNotFound):
		return &APIError{Status: http.StatusNotFound, Message: err.Error()}
	case errors.Is(err, lb.ErrConflict), errors.Is(err, lb.ErrExhausted):
		return &APIError{Status: http.StatusConflict, Message: err.Error()}
	case errors.As(err, &mbe):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Message: "request body larger than the limit",
			Value: formatInt(mbe.Limit)}
	case errors.As(err, &he):
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok {
			msg = s
		}
		return &APIError{Status: he.Code, Message: msg}
	}
	log.Error("api: internal error", "err", err)
	return &APIError{Status: http.StatusInternalServerError, Message: "internal error (see the edgelb log)"}
}

// errorHandler is echo's single exit for errors: one JSON shape everywhere.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ae := toAPIError(err, s.log)
	r := c.Request()
	switch {
	case errors.Is(err, echo.ErrNotFound):
		ae.Message = "no such endpoint: " + r.Method + " " + r.URL.Path + " (see /api/v1/openapi.json)"
	case errors.Is(err, echo.ErrMethodNotAllowed):
		ae.Message = r.Method + " is not allowed on " + r.URL.Path + " (see /api/v1/openapi.json)"
	}
	h := c.Response().Header()
	if ae.Status == http.StatusUnauthorized {
		// RFC 6750: tell the client which scheme to use.
		h.Set("WWW-Authenticate", `Bearer realm="edgelb"`)
	}
	// An error quotes what the client sent, which may not be UTF-8: never
	// let that turn the answer into a 500.
	fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	ae.Message, ae.Field, ae.Value = fix(ae.Message), fix(ae.Field), fix(ae.Value)
	body, merr := marshal(ae)
	if merr != nil {
		body = []byte(`{"error":"internal error"}`)
	}
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		_ = c.NoContent(ae.Status)
		return
	}
	_ = c.Blob(ae.Status, "application/json", body)
}
