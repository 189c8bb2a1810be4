package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/webui"
)

const clientTestToken = "s3cret-token"

// staticFlows is a FlowSource holding a fixed set of flows.
type staticFlows []proxy.Flow

func (f staticFlows) Snapshot(context.Context) ([]proxy.Flow, error) { return f, nil }
func (f staticFlows) Watch(ctx context.Context, fn func(proxy.FlowEvent)) error {
	for _, fl := range f {
		fn(proxy.FlowEvent{Type: proxy.FlowNew, Flow: fl})
	}
	<-ctx.Done()
	return nil
}

// apiServer runs the real webui handlers over the real engine on an
// in-memory store, with fixed flows and health, behind httptest.
func apiServer(t *testing.T, flows staticFlows, health []webui.BackendHealth) string {
	return apiServerWith(t, flows, health, nil)
}

// apiServerWith is apiServer with setup run on the running engine first.
func apiServerWith(t *testing.T, flows staticFlows, health []webui.BackendHealth, setup func(*engine.Engine)) string {
	t.Helper()
	return apiServerReporting(t, flows, health, setup, nil)
}

// apiServerReporting is apiServerWith with announcers to report.
func apiServerReporting(t *testing.T, flows staticFlows, health []webui.BackendHealth, setup func(*engine.Engine), reporters []announce.Reporter) string {
	t.Helper()
	eng, err := engine.NewEngine(store.NewMem(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(engDone) }()
	if setup != nil {
		setup(eng)
	}
	srv, err := webui.New(webui.Options{Manager: eng, Token: clientTestToken, RateLimit: -1, Flows: flows,
		FlowWatchIdle: -1, Health: func() []webui.BackendHealth { return health }, Reporters: reporters})
	if err != nil {
		t.Fatal(err)
	}
	uiDone := make(chan struct{})
	go func() { srv.Run(ctx); close(uiDone) }()
	<-srv.Primed()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { cancel(); <-uiDone; <-engDone; ts.Close() })
	return ts.URL
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := execute(ctx, args, strings.NewReader(""), &out, &errb)
	return out.String(), err
}

func writeFile(t *testing.T, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientVerbsAndStatus(t *testing.T) {
	vip := netip.MustParseAddrPort("192.0.2.10:80")
	b1, b2 := netip.MustParseAddrPort("10.0.0.1:8080"), netip.MustParseAddrPort("10.0.0.2:8080")
	cl := netip.MustParseAddrPort("198.51.100.7:40000")
	flows := staticFlows{
		{ID: 1, Protocol: proxy.TCP, Client: cl, Frontend: vip, Backend: b1, State: "ESTABLISHED"},
		{ID: 2, Protocol: proxy.TCP, Client: netip.MustParseAddrPort("198.51.100.7:40001"), Frontend: vip, Backend: b1, State: "ESTABLISHED"},
		{ID: 3, Protocol: proxy.TCP, Client: netip.MustParseAddrPort("198.51.100.7:40002"), Frontend: vip, Backend: b2, State: "TIME_WAIT"},
	}
	health := []webui.BackendHealth{{Service: "web", Backend: b1.String(), Healthy: true}, {Service: "web", Backend: b2.String(), Healthy: false}}
	url := apiServer(t, flows, health)
	tokFile := writeFile(t, "token", clientTestToken+"\n")

	pool := writeFile(t, "pool.yaml", "name: default\naddresses: [192.0.2.10-192.0.2.20]\nautoAssign: true\n")
	// No token: the API refuses, and the error says so and wraps ErrAPI.
	t.Setenv("EDGELB_TOKEN", "")
	if _, err := run(t, "pools", "apply", "--server", url, "-f", pool); !errors.Is(err, ErrAPI) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("apply without token: %v", err)
	}
	out, err := run(t, "pools", "apply", "--server", url, "--token-file", tokFile, "-f", pool)
	if err != nil || out != "pools/default created\n" {
		t.Fatalf("apply: %q %v", out, err)
	}
	// The token from the environment; a second apply replaces.
	t.Setenv("EDGELB_TOKEN", clientTestToken)
	pool2 := writeFile(t, "pool.json", `[{"name":"default","addresses":["192.0.2.10-192.0.2.30"],"autoAssign":true}]`)
	if out, err := run(t, "pools", "apply", "--server", url, "-f", pool2); err != nil || out != "pools/default configured\n" {
		t.Fatalf("re-apply: %q %v", out, err)
	}
	// A misspelt key is refused, not dropped.
	bad := writeFile(t, "bad.yaml", "name: x\naddresess: [192.0.2.40/32]\n")
	if _, err := run(t, "pools", "apply", "--server", url, "-f", bad); err == nil || !strings.Contains(err.Error(), "addresess") {
		t.Fatalf("misspelt key: %v", err)
	}
	svc := writeFile(t, "svc.yaml", `name: web
vips: [192.0.2.10]
ports: [{port: 80, protocol: TCP}]
backends:
- {address: 10.0.0.1, port: 8080, weight: 3}
- {address: 10.0.0.2, port: 8080}
scheduler: wrr
`)
	if out, err := run(t, "services", "apply", "--server", url, "-f", svc); err != nil || out != "services/web applied\n" {
		t.Fatalf("services apply: %q %v", out, err)
	}
	out, err = run(t, "pools", "get", "--server", url)
	if err != nil || !strings.Contains(out, "default  192.0.2.10-192.0.2.30  true        21    1     api") {
		t.Fatalf("pools get:\n%s %v", out, err)
	}
	out, err = run(t, "services", "get", "--server", url, "-o", "json", "web")
	var ss []webui.ServiceStatus
	if err != nil || json.Unmarshal([]byte(out), &ss) != nil || len(ss) != 1 || ss[0].Assigned[0] != "192.0.2.10" {
		t.Fatalf("services get -o json: %q %v", out, err)
	}

	want := strings.Join([]string{
		"Prot LocalAddress:Port  Scheduler Flags                              Service",
		"  -> RemoteAddress:Port Forward   Weight ActiveConn InActConn Health ",
		"TCP  192.0.2.10:80      wrr                                          web",
		"  -> 10.0.0.1:8080      Masq      3      2          0         up     ",
		"  -> 10.0.0.2:8080      Masq      1      0          1         down   ",
		""}, "\n")
	out, err = run(t, "status", "--server", url)
	if err != nil || out != want {
		t.Fatalf("status:\n%s\nwant:\n%s\nerr %v", out, want, err)
	}
	out, err = run(t, "status", "--server", url, "-o", "json")
	var rep statusReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Virtual) != 1 {
		t.Fatalf("status -o json: %s %v", out, err)
	}
	if vs := rep.Virtual; vs[0].Backends[0].ActiveConn != 2 || vs[0].Backends[1].InActConn != 1 || vs[0].Backends[1].Health != "down" {
		t.Fatalf("status -o json: %s %v", out, err)
	}

	out, err = run(t, "status", "-o", "yaml", "--server", url)
	var ry statusReport
	if err != nil || yaml.UnmarshalStrict([]byte(out), &ry) != nil || !reflect.DeepEqual(ry, rep) {
		t.Fatalf("status -o yaml: %s %v", out, err)
	}

	if out, err := run(t, "services", "delete", "--server", url, "web"); err != nil || out != "services/web deleted\n" {
		t.Fatalf("services delete: %q %v", out, err)
	}
	if out, err := run(t, "pools", "delete", "--server", url, "default"); err != nil || out != "pools/default deleted\n" {
		t.Fatalf("pools delete: %q %v", out, err)
	}
	if _, err := run(t, "pools", "get", "--server", url, "default"); !errors.Is(err, ErrAPI) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get after delete: %v", err)
	}
}

func TestStatusWatchStopsOnCancel(t *testing.T) {
	url := apiServer(t, nil, nil)
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := execute(ctx, []string{"status", "--server", url, "--watch", "--interval", "10ms"}, strings.NewReader(""), &out, &out)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("--watch did not stop on cancel")
	}
}

// TestStatusFWMark: a firewall-mark service is a row of its own, as
// ipvsadm -ln shows it ("FWM  42", after the VIP rows; a backend without a
// port as :0). Its connections are the flows to any frontend that is no VIP
// row's, to one of its backends (by address alone for the one without a
// port): the VIP service's flow to the backend they share is not counted.
func TestStatusFWMark(t *testing.T) {
	shared := netip.MustParseAddrPort("10.0.0.3:8080")
	flows := staticFlows{
		{ID: 1, Protocol: proxy.TCP, Client: netip.MustParseAddrPort("198.51.100.7:40000"), Frontend: netip.MustParseAddrPort("192.0.2.10:80"), Backend: shared, State: "ESTABLISHED"},
		{ID: 2, Protocol: proxy.TCP, Client: netip.MustParseAddrPort("198.51.100.7:40001"), Frontend: netip.MustParseAddrPort("203.0.113.5:80"), Backend: shared, State: "ESTABLISHED"},
		{ID: 3, Protocol: proxy.TCP, Client: netip.MustParseAddrPort("198.51.100.7:40002"), Frontend: netip.MustParseAddrPort("203.0.113.5:443"), Backend: netip.MustParseAddrPort("10.0.0.4:443"), State: "TIME_WAIT"},
		{ID: 4, Protocol: proxy.UDP, Client: netip.MustParseAddrPort("198.51.100.7:40003"), Frontend: netip.MustParseAddrPort("203.0.113.5:53"), Backend: netip.MustParseAddrPort("10.0.0.4:53")},
	}
	url := apiServer(t, flows, nil)
	t.Setenv("EDGELB_TOKEN", clientTestToken)
	pool := writeFile(t, "pool.yaml", "name: default\naddresses: [192.0.2.10-192.0.2.20]\n")
	if _, err := run(t, "pools", "apply", "--server", url, "-f", pool); err != nil {
		t.Fatal(err)
	}
	svcs := writeFile(t, "svcs.yaml", `- name: web
  vips: [192.0.2.10]
  ports: [{port: 80}]
  backends: [{address: 10.0.0.3, port: 8080}]
- name: marked
  fwmark: 42
  method: nat-nosnat
  scheduler: rr
  backends: [{address: 10.0.0.3, port: 8080, weight: 2}, {address: 10.0.0.4}]
`)
	if _, err := run(t, "services", "apply", "--server", url, "-f", svcs); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"Prot LocalAddress:Port  Scheduler Flags                              Service",
		"  -> RemoteAddress:Port Forward   Weight ActiveConn InActConn Health ",
		"TCP  192.0.2.10:80      wrr                                          web",
		"  -> 10.0.0.3:8080      Masq      1      1          0         -      ",
		"FWM  42                 rr                                           marked",
		"  -> 10.0.0.3:8080      Masq      2      1          0         -      ",
		"  -> 10.0.0.4:0         Masq      1      0          2         -      ",
		""}, "\n")
	out, err := run(t, "status", "--server", url)
	if err != nil || out != want {
		t.Fatalf("status:\n%s\nwant:\n%s\nerr %v", out, want, err)
	}
}
