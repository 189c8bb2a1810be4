package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/webui"
)

// ErrAPI is wrapped by every error the REST API answered with, so callers
// can tell "the daemon said no" from "could not reach the daemon".
var ErrAPI = errors.New("edgelb API")

// apiClient is a thin client of edgelb's REST API (webui): it sends and
// receives the same DTOs the server declares, so it cannot drift from them.
type apiClient struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// ErrEmptyToken: a --token-file holding nothing (or only white space).
// Sending no token then would be read as "the token is wrong" by the
// server, or pass where the server wants none — neither is what the
// operator meant.
var ErrEmptyToken = errors.New("the file holds no token (empty or only white space)")

// clientFlags are the flags every REST verb shares.
type clientFlags struct {
	server    string
	tokenFile string
	timeout   time.Duration
}

func addClientFlags(fs *pflag.FlagSet) *clientFlags {
	f := &clientFlags{}
	fs.StringVar(&f.server, "server", "http://"+webui.DefaultListen, "edgelb API base URL")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the API token, sent on reads and writes (default: $EDGELB_TOKEN)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "per-request timeout")
	return f
}

// client parses the flags once into an apiClient. The token is read from
// --token-file, else EDGELB_TOKEN, and sent with every request (reads need
// one when the API listens beyond loopback).
func (f *clientFlags) client() (*apiClient, error) {
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http(s)://HOST:PORT", f.server)
	}
	tok := strings.TrimSpace(os.Getenv("EDGELB_TOKEN"))
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if tok = strings.TrimSpace(string(b)); tok == "" {
			return nil, fmt.Errorf("--token-file %q: %w", f.tokenFile, ErrEmptyToken)
		}
	}
	return &apiClient{base: u, token: tok, hc: &http.Client{Timeout: f.timeout}}, nil
}

// do sends body (JSON-encoded when not nil) and decodes a 2xx answer into
// out; an error answer becomes an error wrapping ErrAPI with the server's
// message, field and value.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	p, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath(p)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// Reads too: beyond loopback the API needs a token for them.
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		var ae webui.APIError
		if json.Unmarshal(b, &ae) != nil || ae.Message == "" {
			ae.Message = strings.TrimSpace(string(b))
		}
		msg := fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, ae.Message)
		if ae.Field != "" {
			msg += fmt.Sprintf(" (field %s, value %q)", ae.Field, ae.Value)
		}
		return resp.StatusCode, fmt.Errorf("%w: %s", ErrAPI, msg)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// readObjects reads a file (or "-" for stdin) holding one object or a list,
// in JSON or YAML, into []T.
func readObjects[T any](path string, stdin io.Reader) ([]T, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	j = bytes.TrimSpace(j)
	if len(j) > 0 && j[0] == '[' {
		var list []T
		if err := strictJSON(j, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return list, nil
	}
	var one T
	if err := strictJSON(j, &one); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []T{one}, nil
}

// strictJSON refuses unknown fields: a misspelt key must not be dropped.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}
