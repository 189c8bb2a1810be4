package webui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// usedHeaders are the request headers edgelb reads; each must be UTF-8.
var usedHeaders = []string{"Authorization", "Content-Type", "Last-Event-ID", "Origin", "Sec-Fetch-Site", "Accept"}

// validUTF8 refuses a request whose path, query (names and values, after
// percent-decoding) or a header edgelb reads is not valid UTF-8, with a 400
// naming which (issue 36: "?frontend=%ff" answered 500 "internal error",
// because the error quoting the value could not be encoded as JSON). JSON
// bodies are checked by the decoder (decodeStrict).
func validUTF8(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if p := r.URL.Path; !utf8.ValidString(p) {
			return &APIError{Status: http.StatusBadRequest, Field: "path", Value: sanitize(r.URL.EscapedPath()),
				Message: "the URL path is not valid UTF-8 (after percent-decoding)"}
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return &APIError{Status: http.StatusBadRequest, Field: "query", Value: sanitize(r.URL.RawQuery),
				Message: "the query string does not parse: " + sanitize(err.Error())}
		}
		for k, vs := range q {
			if !utf8.ValidString(k) {
				return &APIError{Status: http.StatusBadRequest, Field: "query", Value: sanitize(k),
					Message: "a query parameter name is not valid UTF-8 (after percent-decoding)"}
			}
			for _, v := range vs {
				if !utf8.ValidString(v) {
					return &APIError{Status: http.StatusBadRequest, Field: k, Value: sanitize(v),
						Message: "query parameter " + strconv.Quote(k) + " is not valid UTF-8 (after percent-decoding)"}
				}
			}
		}
		for _, h := range usedHeaders {
			for _, v := range r.Header.Values(h) {
				if !utf8.ValidString(v) {
					val := sanitize(v)
					if h == "Authorization" {
						val = "" // never echo a credential
					}
					return &APIError{Status: http.StatusBadRequest, Field: "header " + h, Value: val,
						Message: "the " + h + " header is not valid UTF-8"}
				}
			}
		}
		return next(c)
	}
}

// sanitize makes s safe to quote in a JSON error: invalid bytes become
// U+FFFD, and long values are cut.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "")
}
