package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/webui"

	"sigs.k8s.io/yaml"
)

// recorder is an API server that records what reaches it: method, escaped
// path and Authorization header, one line each.
type recorder struct {
	mu   sync.Mutex
	reqs []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" "+req.URL.EscapedPath()+" "+req.Header.Get("Authorization"))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	name := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/api/v1/services":
		json.NewEncoder(w).Encode([]webui.ServiceStatus{recSvc("web", "api"), recSvc("dns", "config")})
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/v1/services/"):
		json.NewEncoder(w).Encode(recSvc(name, "api"))
	case req.Method == http.MethodGet && req.URL.Path == "/api/v1/pools":
		json.NewEncoder(w).Encode([]webui.PoolStatus{recPool("default", "config")})
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/v1/pools/"):
		json.NewEncoder(w).Encode(recPool(name, "api"))
	case req.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Write([]byte("{}"))
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

func recSvc(name, origin string) webui.ServiceStatus {
	return webui.ServiceStatus{Spec: webui.ServiceSpec{Name: name, Ports: []webui.PortSpec{{Port: 80, Protocol: "TCP"}},
		Backends: []webui.BackendSpec{{Address: "10.0.0.1", Port: 8080}}, Scheduler: "rr", Method: "nat"},
		Assigned: []string{"192.0.2.10"}, Origin: origin}
}

func recPool(name, origin string) webui.PoolStatus {
	return webui.PoolStatus{Spec: webui.PoolSpec{Name: name, Addresses: []string{"192.0.2.0/28"}}, Size: 16, Used: 1, Origin: origin}
}

// cli runs one command line in-process as main does: exit code, stdout, stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := runMain(ctx, args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestFlagsAnywhere (issue 36): the REST verbs parse like kubectl — flags
// before, after or between names, `--` ends the flags, an unknown flag or
// an empty token file is an error before any request. Each case lists the
// requests the server must see, in order, with their Authorization (sent
// on reads too: beyond loopback the API needs a token for them).
func TestFlagsAnywhere(t *testing.T) {
	rec := &recorder{}
	ts := httptest.NewServer(rec)
	defer ts.Close()
	dir := t.TempDir()
	tok := writeFile(t, "token", "file-token\n")
	empty := writeFile(t, "empty", "")
	blank := writeFile(t, "blank", " \n\t\n")
	svc := writeFile(t, "svc.yaml", "name: web\nports: [{port: 80}]\nbackends: [{address: 10.0.0.1, port: 8080}]\n")
	pool := writeFile(t, "pool.yaml", "name: default\naddresses: [192.0.2.0/28]\n")
	// The default server is never the one meant: a request sent there
	// (flags taken for names) must fail, not reach something else.
	t.Setenv("EDGELB_TOKEN", "env-token")
	U, F := ts.URL, tok
	const fileTok, envTok = "Bearer file-token", "Bearer env-token"

	cases := []struct {
		name string
		args []string
		code int
		reqs []string // "METHOD PATH AUTH"
		out  string   // in stdout
		err  string   // in stderr
	}{
		{"issue's line: flags after the name", []string{"services", "delete", "a.b", "--server", U, "--token-file", F}, 0,
			[]string{"DELETE /api/v1/services/a.b " + fileTok}, "services/a.b deleted\n", ""},
		{"flags before the name", []string{"services", "delete", "--server", U, "--token-file", F, "x"}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok}, "services/x deleted", ""},
		{"name between flags", []string{"services", "delete", "--server", U, "x", "--token-file", F}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok}, "", ""},
		{"--flag=value and two names around them", []string{"services", "delete", "x", "--server=" + U, "y", "--token-file=" + F}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok, "DELETE /api/v1/services/y " + fileTok}, "services/y deleted", ""},
		{"flags before the verb", []string{"services", "--server", U, "delete", "x", "--token-file", F}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok}, "", ""},
		{"-- then a name starting with -", []string{"services", "delete", "--server", U, "--token-file", F, "--", "-x"}, 0,
			[]string{"DELETE /api/v1/services/-x " + fileTok}, "services/-x deleted", ""},
		{"after -- flags are names", []string{"services", "delete", "--server", U, "--token-file", F, "--", "x", "--server"}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok, "DELETE /api/v1/services/--server " + fileTok}, "", ""},
		{"token from the environment", []string{"services", "delete", "x", "--server", U}, 0,
			[]string{"DELETE /api/v1/services/x " + envTok}, "", ""},
		{"--timeout too, after the name", []string{"services", "delete", "x", "--server", U, "--timeout", "5s", "--token-file", F}, 0,
			[]string{"DELETE /api/v1/services/x " + fileTok}, "", ""},
		{"--bogus after the name", []string{"services", "delete", "x", "--server", U, "--bogus"}, 2, nil, "", "unknown flag: --bogus"},
		{"--bogus before the name", []string{"services", "delete", "--bogus", "x", "--server", U}, 2, nil, "", "unknown flag: --bogus"},
		{"--bogus=1 on get", []string{"services", "get", "--server", U, "--bogus=1"}, 2, nil, "", "unknown flag: --bogus"},
		{"single-dash long flag", []string{"services", "delete", "x", "-server", U}, 2, nil, "", "--server"},
		{"empty token file", []string{"services", "delete", "x", "--server", U, "--token-file", empty}, 2, nil, "", empty},
		{"white-space token file", []string{"services", "delete", "--token-file", blank, "x", "--server", U}, 2, nil, "", blank},
		{"missing token file", []string{"services", "delete", "x", "--server", U, "--token-file", filepath.Join(dir, "nope")}, 2, nil, "", "nope"},
		{"delete without a name", []string{"services", "delete", "--server", U, "--token-file", F}, 2, nil, "", "NAME"},
		{"get one, -o json after", []string{"services", "get", "web", "--server", U, "-o", "json"}, 0,
			[]string{"GET /api/v1/services/web " + envTok}, `"name": "web"`, ""},
		{"get, -o yaml before the name", []string{"services", "get", "--server", U, "-o", "yaml", "web"}, 0,
			[]string{"GET /api/v1/services/web " + envTok}, "origin: api\n", ""},
		{"get -ojson glued", []string{"services", "get", "web", "-ojson", "--server", U}, 0,
			[]string{"GET /api/v1/services/web " + envTok}, `"origin": "api"`, ""},
		{"get --output=wide", []string{"services", "get", "--output=wide", "--server", U}, 0,
			[]string{"GET /api/v1/services " + envTok}, "SCHEDULER", ""},
		{"get table shows ORIGIN", []string{"services", "get", "--server", U}, 0,
			[]string{"GET /api/v1/services " + envTok}, "ORIGIN", ""},
		{"list is get", []string{"services", "list", "--server", U, "dns"}, 0,
			[]string{"GET /api/v1/services/dns " + envTok}, "dns", ""},
		{"-o xml", []string{"services", "get", "web", "--server", U, "-o", "xml"}, 2, nil, "", `invalid argument "xml" for "-o, --output"`},
		{"apply -f after the flags", []string{"services", "apply", "--server", U, "--token-file", F, "-f", svc}, 0,
			[]string{"PUT /api/v1/services/web " + fileTok}, "services/web applied", ""},
		{"apply -f first", []string{"services", "apply", "-f", svc, "--token-file", F, "--server", U}, 0,
			[]string{"PUT /api/v1/services/web " + fileTok}, "", ""},
		{"apply without -f", []string{"services", "apply", "--server", U, "--token-file", F}, 2, nil, "", "-f FILE"},
		{"apply with a stray name", []string{"services", "apply", "-f", svc, "web", "--server", U}, 2, nil, "", `"web"`},
		{"apply --bogus", []string{"services", "apply", "-f", svc, "--server", U, "--bogus"}, 2, nil, "", "--bogus"},
		{"pools delete, flags after", []string{"pools", "delete", "p1", "--server", U, "--token-file", F}, 0,
			[]string{"DELETE /api/v1/pools/p1 " + fileTok}, "pools/p1 deleted", ""},
		{"pools delete -- -p", []string{"pools", "delete", "--token-file", F, "--server", U, "--", "-p"}, 0,
			[]string{"DELETE /api/v1/pools/-p " + fileTok}, "", ""},
		{"pools get -o yaml", []string{"pools", "get", "default", "-o", "yaml", "--server", U}, 0,
			[]string{"GET /api/v1/pools/default " + envTok}, "origin: api", ""},
		{"pools get -o wide", []string{"pools", "get", "-o", "wide", "--server", U}, 0,
			[]string{"GET /api/v1/pools " + envTok}, "AVOIDBUGGYIPS", ""},
		{"pools get table", []string{"pools", "--server", U, "get"}, 0,
			[]string{"GET /api/v1/pools " + envTok}, "config", ""},
		{"pools apply, token after -f", []string{"pools", "apply", "-f", pool, "--token-file", F, "--server", U}, 0,
			[]string{"GET /api/v1/pools/default " + fileTok, "PUT /api/v1/pools/default " + fileTok}, "pools/default configured", ""},
		{"pools apply empty token", []string{"pools", "apply", "-f", pool, "--token-file", empty, "--server", U}, 2, nil, "", "no token"},
		{"pools get --bogus", []string{"pools", "get", "--server", U, "--bogus"}, 2, nil, "", "--bogus"},
		{"pools unknown verb", []string{"pools", "remove", "x", "--server", U}, 2, nil, "", `unknown command "remove"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec.take()
			code, out, errs := cli(t, c.args...)
			got := rec.take()
			if code != c.code || !reflect.DeepEqual(got, c.reqs) || !strings.Contains(out, c.out) || !strings.Contains(errs, c.err) {
				t.Fatalf("edgelb %s\nexit %d (want %d)\nrequests %q\nwant     %q\nstdout:\n%s\nstderr:\n%s (want %q)",
					strings.Join(c.args, " "), code, c.code, got, c.reqs, out, errs, c.err)
			}
		})
	}
	if len(cases) < 20 {
		t.Fatalf("%d cases", len(cases))
	}
}

// TestOutputFormats: -o json and yaml carry the same objects (yaml keyed
// as the API's JSON), table and wide have the ORIGIN column.
func TestOutputFormats(t *testing.T) {
	rec := &recorder{}
	ts := httptest.NewServer(rec)
	defer ts.Close()
	var fromJSON, fromYAML []webui.ServiceStatus
	_, j, _ := cli(t, "services", "get", "--server", ts.URL, "-o", "json")
	_, y, _ := cli(t, "services", "get", "--server", ts.URL, "-o", "yaml")
	if err := json.Unmarshal([]byte(j), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(y), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, fromYAML) || len(fromJSON) != 2 || fromJSON[1].Origin != "config" {
		t.Fatalf("json %+v\nyaml %+v", fromJSON, fromYAML)
	}
	_, table, _ := cli(t, "services", "get", "--server", ts.URL)
	_, wide, _ := cli(t, "services", "get", "--server", ts.URL, "-o", "wide")
	wantTable := "NAME  VIPS        PORTS   BACKENDS  POOL  ORIGIN  PENDING\n" +
		"web   192.0.2.10  80/TCP  1               api     \n" +
		"dns   192.0.2.10  80/TCP  1               config  \n"
	wantWide := "NAME  VIPS        PORTS   BACKENDS  POOL  ORIGIN  SCHEDULER  METHOD  ENDPOINTS      FAILED  PENDING\n" +
		"web   192.0.2.10  80/TCP  1               api     rr         nat     10.0.0.1:8080  -       \n" +
		"dns   192.0.2.10  80/TCP  1               config  rr         nat     10.0.0.1:8080  -       \n"
	if table != wantTable || wide != wantWide {
		t.Fatalf("table:\n%s\nwant:\n%s\nwide:\n%s\nwant:\n%s", table, wantTable, wide, wantWide)
	}
	t.Logf("services get:\n%s\nservices get -o wide:\n%s", table, wide)
}

// TestGetShowsOrigin: against the real API over the real engine, a
// config-file service and pool show ORIGIN config, REST ones api.
func TestGetShowsOrigin(t *testing.T) {
	cfg, err := config.Parse([]byte(`
pools:
  - {name: file-pool, addresses: ["192.0.2.0/28"]}
services:
  - {name: file-svc, pool: file-pool, ports: [{port: 80}], backends: [{address: "198.51.100.1:80"}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	url := apiServerWith(t, nil, nil, func(eng *engine.Engine) {
		if err := eng.SyncConfig(context.Background(), cfg.Pools, cfg.Services); err != nil {
			t.Fatal(err)
		}
	})
	tok := writeFile(t, "token", clientTestToken)
	svc := writeFile(t, "svc.yaml", "name: rest-svc\npool: file-pool\nports: [{port: 81}]\nbackends: [{address: 198.51.100.2, port: 80}]\n")
	if code, out, errs := cli(t, "services", "apply", "-f", svc, "--server", url, "--token-file", tok); code != 0 {
		t.Fatalf("apply: %d %s %s", code, out, errs)
	}
	_, out, _ := cli(t, "services", "get", "--server", url)
	_, pools, _ := cli(t, "pools", "get", "--server", url)
	t.Logf("services get:\n%s\npools get:\n%s", out, pools)
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "file-svc") || strings.Fields(lines[1])[5] != "config" ||
		!strings.HasPrefix(lines[2], "rest-svc") || strings.Fields(lines[2])[5] != "api" ||
		!strings.Contains(pools, "config") {
		t.Fatalf("origins:\n%s\n%s", out, pools)
	}
}

// TestCompletion: the shells' scripts, and names completed from the API
// the command line points at.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "edgelb") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes, %s", sh, code, len(out), errs)
		}
	}
	rec := &recorder{}
	ts := httptest.NewServer(rec)
	defer ts.Close()
	_, out, _ := cli(t, "__complete", "services", "delete", "--server", ts.URL, "w")
	if !strings.HasPrefix(out, "web\n") || strings.Contains(out, "dns") {
		t.Errorf("names: %q", out)
	}
	_, out, _ = cli(t, "__complete", "pools", "get", "-o", "")
	if !strings.HasPrefix(out, "table\nwide\njson\nyaml\n") {
		t.Errorf("-o values: %q", out)
	}
}
