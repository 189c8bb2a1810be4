package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

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

// clientFlags are the flags every REST verb shares.
type clientFlags struct {
	server    *string
	tokenFile *string
	timeout   *time.Duration
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		server:    fs.String("server", "http://"+webui.DefaultListen, "edgelb API base URL"),
		tokenFile: fs.String("token-file", "", "file holding the API token for writes (default: $EDGELB_TOKEN)"),
		timeout:   fs.Duration("timeout", 10*time.Second, "per-request timeout"),
	}
}

// client parses the flags once into an apiClient. The token is read from
// --token-file, else EDGELB_TOKEN; reads need none.
func (f clientFlags) client() (*apiClient, error) {
	u, err := url.Parse(*f.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http(s)://HOST:PORT", *f.server)
	}
	tok := strings.TrimSpace(os.Getenv("EDGELB_TOKEN"))
	if *f.tokenFile != "" {
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return &apiClient{base: u, token: tok, hc: &http.Client{Timeout: *f.timeout}}, nil
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
	if c.token != "" && method != http.MethodGet {
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

// objectVerbs runs `edgelb pools|services get|apply -f|delete`.
func objectVerbs(kind string, ctx context.Context, args []string, stdout io.Writer,
	get func(*apiClient, context.Context, []string, bool, io.Writer) error,
	apply func(*apiClient, context.Context, string, io.Writer) error) error {
	synopsis := "get [NAME...] [-o json] | apply -f FILE | delete NAME..."
	if len(args) == 0 {
		return &exitError{code: 2, err: fmt.Errorf("want a verb: %s", synopsis)}
	}
	verb := args[0]
	if verb == "-h" || verb == "-help" || verb == "--help" {
		fmt.Fprintf(stdout, "Usage: edgelb %s %s\n\nRun 'edgelb %s VERB --help' for a verb's flags.\n", kind, synopsis, kind)
		return flag.ErrHelp
	}
	fs := newFlags(kind+" "+verb, synopsis, stdout)
	cf := addClientFlags(fs)
	file := fs.String("f", "", "file with one object or a list, JSON or YAML (- for stdin); apply only")
	output := fs.String("o", "table", "output: table or json; get only")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	switch verb {
	case "get":
		if *output != "table" && *output != "json" {
			return &exitError{code: 2, err: fmt.Errorf("-o %q: want table or json", *output)}
		}
		return get(c, ctx, fs.Args(), *output == "json", stdout)
	case "apply":
		if *file == "" {
			return &exitError{code: 2, err: errors.New("apply needs -f FILE")}
		}
		return apply(c, ctx, *file, stdout)
	case "delete":
		if fs.NArg() == 0 {
			return &exitError{code: 2, err: errors.New("delete needs at least one NAME")}
		}
		for _, n := range fs.Args() {
			if _, err := c.do(ctx, http.MethodDelete, "/api/v1/"+kind+"/"+url.PathEscape(n), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s/%s deleted\n", kind, n)
		}
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown verb %q: want %s", verb, synopsis)}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
