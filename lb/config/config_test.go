package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// fakeFiles serves files from a map; anything else does not exist.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
}

func parseWith(y string, files map[string]string) (*Config, error) {
	return parse([]byte(y), env{readFile: fakeFiles(files)})
}

func mustParse(t *testing.T, y string, files map[string]string) *Config {
	t.Helper()
	cfg, err := parseWith(y, files)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, y)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a parsed config does not re-validate: %v", err)
	}
	return cfg
}

func TestDefaults(t *testing.T) {
	for _, y := range []string{"", "# nothing\n", "{}", "pools: []\nservices:\n"} {
		cfg := mustParse(t, y, nil)
		want := &Config{
			Announce: Announce{WithdrawOnShutdown: true},
			Dataplane: Dataplane{Mode: ModeAuto, DrainTimeout: DefaultDrainTimeout, ResyncInterval: DefaultResyncInterval,
				SNAT: true, NodePortRange: PortRange{First: 30000, Last: 32767}, IPVSDevice: DefaultIPVSDevice, SetSysctls: true},
			API: API{Listen: netip.MustParseAddrPort("127.0.0.1:8080"), LiveFlows: LiveFlowsOnDemand},
			Kubernetes: Kubernetes{LoadBalancerClass: "edgelb.io/lb", LeaseName: "edgelb", LeaseNamespace: "edgelb-system",
				BackendMode: BackendEndpoints, Scheduler: proxy.WeightedRoundRobin, Method: proxy.NAT},
			State:  State{Dir: "/var/lib/edgelb"},
			Health: Health{AllDown: AllDownKeep, MaxInFlight: 64},
			Log:    Log{Format: "text"},
		}
		cfg.Pools, cfg.Services = nil, nil
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("%q: defaults\n%+v\nwant\n%+v", y, cfg, want)
		}
	}
}

const exampleToken = "s3cr3t-token"

func loadExample(t *testing.T, data []byte) *Config {
	t.Helper()
	real := readRegular
	files := func(p string) ([]byte, error) {
		if p == "/etc/edgelb/token" {
			return []byte(exampleToken + "\n"), nil
		}
		return real(p)
	}
	cfg, err := parse(data, env{dir: "../../systemd", readFile: files})
	if err != nil {
		t.Fatalf("systemd/config.example.yaml: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("example does not re-validate: %v", err)
	}
	return cfg
}

// TestExampleConfig: the shipped example parses (with /etc/edgelb/token
// faked) into the values its comments promise; its commented-out DR service
// is valid too once uncommented.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../../systemd/config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadExample(t, data)
	if len(cfg.Pools) != 2 || len(cfg.Services) != 3 {
		t.Fatalf("pools %d services %d", len(cfg.Pools), len(cfg.Services))
	}
	pub := cfg.Pools[0]
	if got := pub.RangeStrings(); !reflect.DeepEqual(got, []string{"192.0.2.100-192.0.2.149", "2001:db8:100::/120"}) ||
		!pub.AutoAssign || !pub.AvoidBuggyIPs || pub.Advertisement.LocalPref != 200 {
		t.Errorf("pool public: %+v", pub)
	}
	if cfg.Pools[1].AutoAssign {
		t.Errorf("pool internal autoAssign")
	}
	web := cfg.Services[0]
	wantWeb := lb.ServiceSpec{
		Name: "web",
		VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.100")},
		Ports: []lb.PortSpec{
			{Name: "http", Port: 80, Protocol: proxy.TCP, TargetPort: 8080, NodePort: 30080},
			{Name: "https", Port: 443, Protocol: proxy.TCP, TargetPort: 8443},
		},
		Backends: []lb.BackendSpec{
			{Addr: netip.MustParseAddr("198.51.100.11"), Weight: 3},
			{Addr: netip.MustParseAddr("198.51.100.12"), Weight: 1},
			{Addr: netip.MustParseAddr("198.51.100.13"), Weight: 0},
		},
		Scheduler: proxy.WeightedRoundRobin,
		Affinity:  3 * time.Hour,
		Method:    proxy.NAT,
		Health: &lb.HealthCheck{Type: "http", Path: "/healthz", Host: "www.example.com", Expect: 200, Port: 8080,
			Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3},
	}
	if !reflect.DeepEqual(web, wantWeb) {
		t.Errorf("web\n%+v\nwant\n%+v", web, wantWeb)
	}
	dns := cfg.Services[1]
	if dns.Pool != "internal" || dns.SharingKey != "edge-shared" || len(dns.VIPs) != 0 ||
		dns.Ports[0].Protocol != proxy.UDP || dns.Backends[0].Port != 5353 || dns.Scheduler != proxy.SourceHash ||
		dns.Health.Type != "tcp" || dns.Health.Expect != 0 {
		t.Errorf("dns: %+v", dns)
	}
	api := cfg.Services[2]
	if len(api.VIPs) != 2 || !api.VIPs[1].Is6() || api.Backends[1].Addr != netip.MustParseAddr("2001:db8:200::31") || api.Backends[1].Port != 8443 {
		t.Errorf("api: %+v", api)
	}
	a := cfg.Announce
	if !a.WithdrawOnShutdown || a.L2 == nil || a.L2.Interface != "eth0" || a.L2.Members == nil ||
		a.L2.Members.Bind != netip.MustParseAddrPort("192.0.2.11:7946") ||
		!reflect.DeepEqual(a.L2.Members.Join, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.12:7946"), netip.MustParseAddrPort("192.0.2.13:7946")}) ||
		a.L2.Members.ProbeInterval != 80*time.Millisecond || a.L2.Members.SuspicionMult != 2 {
		t.Errorf("announce.l2: %+v %+v", a.L2, a.L2.Members)
	}
	b := a.BGP
	if b == nil || b.LocalASN != 64512 || b.RouterID != netip.MustParseAddr("192.0.2.11") || b.ListenPort != 0 || len(b.Peers) != 2 {
		t.Fatalf("bgp: %+v", b)
	}
	if p := b.Peers[0]; p.Name != "tor1" || p.ASN != 64500 || p.Port != 179 || p.HoldTime != 9*time.Second || p.Keepalive != 3*time.Second || !p.GracefulRestart {
		t.Errorf("peer 0: %+v", p)
	}
	if p := b.Peers[1]; p.Name != "2001:db8::1" || p.MultihopTTL != 2 || p.HoldTime != 90*time.Second || p.Keepalive != 30*time.Second {
		t.Errorf("peer 1: %+v", p)
	}
	if cfg.API.Token != exampleToken || cfg.API.TokenFile != "/etc/edgelb/token" {
		t.Errorf("token %q from %q", string(cfg.API.Token), cfg.API.TokenFile)
	}
	if len(cfg.NeedsIPVS()) != 0 {
		t.Errorf("the active example needs IPVS: %v", cfg.NeedsIPVS())
	}

	// Uncomment the DR service: still valid with mode auto, and it needs IPVS.
	var lines []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "  # - name: video") {
			in = true
		}
		if in && !strings.HasPrefix(l, "  # ") {
			in = false
		}
		if in {
			l = "  " + strings.TrimPrefix(l, "  # ")
		}
		lines = append(lines, l)
	}
	dr := loadExample(t, []byte(strings.Join(lines, "\n")))
	if got := dr.NeedsIPVS(); !reflect.DeepEqual(got, []string{"video"}) {
		t.Errorf("NeedsIPVS = %v", got)
	}
	// The commented kubernetes block, on its own, is valid.
	var k8s []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "# kubernetes:") || strings.HasPrefix(l, "#   ") && len(k8s) > 0 {
			k8s = append(k8s, strings.TrimPrefix(l, "# "))
		}
	}
	kc, err := parse([]byte(strings.Join(k8s, "\n")), env{readFile: fakeFiles(map[string]string{"/etc/edgelb/kubeconfig": "apiVersion: v1"})})
	if err != nil || !kc.Kubernetes.Enabled || kc.Kubernetes.NodeName != "gw1" || len(k8s) < 8 {
		t.Errorf("kubernetes block %q: %v", k8s, err)
	}
	// So is the commented tls line, with real PEM files behind it.
	certPEM, keyPEM := selfSigned(t)
	tlsYAML := strings.Replace(string(data), "  # tls: {", "  tls: {", 1)
	tc, err := parse([]byte(tlsYAML), env{readFile: fakeFiles(map[string]string{"/etc/edgelb/token": "t",
		"/etc/edgelb/tls.crt": certPEM, "/etc/edgelb/tls.key": keyPEM, "/etc/edgelb/clients.pem": certPEM})})
	if err != nil || tc.API.TLS == nil || len(tc.API.TLS.Certificate.Certificate) != 1 || tc.API.TLS.ClientCAs == nil {
		t.Errorf("tls: %v %+v", err, tc)
	}

	// ...and refused on nftables, naming the field.
	nft := strings.Replace(strings.Join(lines, "\n"), "mode: auto ", "mode: nftables ", 1)
	_, err = parse([]byte(nft), env{readFile: fakeFiles(map[string]string{"/etc/edgelb/token": "x"})})
	assertErrors(t, err, []want{{"services[3].method", `"dr": refused by the dataplane`}})
}

// want is one expected error: its exact field path and a piece of its text.
type want struct{ field, text string }

func assertErrors(t *testing.T, err error, wants []want) {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want *Errors, got %v", err)
	}
	for _, w := range wants {
		found := false
		for _, fe := range errs.List {
			if fe.Field == w.field && strings.Contains(fe.Error(), w.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no error %s ... %s in:\n%s", w.field, w.text, errs.Error())
		}
	}
}

func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("  abc\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("md5pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	y := `
api: {tokenFile: token}
state: {dir: state}
announce:
  bgp:
    localASN: 65001
    peers: [{address: 192.0.2.1, asn: 65002, passwordFile: pw}]
`
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Token != "abc" || cfg.API.TokenFile != filepath.Join(dir, "token") || cfg.State.Dir != filepath.Join(dir, "state") ||
		cfg.Announce.BGP.Peers[0].Password != "md5pass" {
		t.Errorf("relative paths: %+v %+v", cfg.API, cfg.State)
	}
	// Errors from Load name the file; a missing file is a plain error.
	if err := os.WriteFile(cfgPath, []byte("api: {tokenFile: nope}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(cfgPath)
	var errs *Errors
	if !errors.As(err, &errs) || errs.Source != cfgPath || !strings.HasPrefix(err.Error(), cfgPath+": api.tokenFile \"nope\": cannot read") {
		t.Errorf("Load error: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// Devices and directories are refused without reading them.
	_, err = Parse([]byte("api: {liveFlows: sometimes}\n"))
	assertErrors(t, err, []want{{"api.liveFlows", `want "onDemand" or "always"`}})
	_, err = Parse([]byte("api: {tokenFile: /dev/zero}\n"))
	assertErrors(t, err, []want{{"api.tokenFile", "not a regular file"}})
	_, err = Parse([]byte("api: {tokenFile: " + dir + "}\n"))
	assertErrors(t, err, []want{{"api.tokenFile", "not a regular file"}})
}

func TestSecretsRedacted(t *testing.T) {
	cfg := mustParse(t, `
api: {tokenFile: /t}
announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65002, password: hunter2}]}}
`, map[string]string{"/t": "tokentoken"})
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%#v", cfg.API), fmt.Sprint(cfg.Announce.BGP.Peers)} {
		if strings.Contains(s, "tokentoken") || strings.Contains(s, "hunter2") {
			t.Errorf("secret printed: %s", s)
		}
	}
	if string(cfg.API.Token) != "tokentoken" || string(cfg.Announce.BGP.Peers[0].Password) != "hunter2" {
		t.Errorf("secrets not kept")
	}
	// The error for both password and passwordFile does not quote the password.
	_, err := parseWith(`announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65002, password: hunter2, passwordFile: /p}]}}`, nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err = %v", err)
	}
}

func TestNodePortInput(t *testing.T) {
	cfg := mustParse(t, `
pools: [{name: p, addresses: ["192.0.2.0/24"]}]
dataplane: {nodeAddresses: ["198.51.100.1"], nodePortRange: "31000-31999"}
services:
  - {name: a, vip: 192.0.2.10, ports: [{port: 80, nodePort: 31080}, {port: 53, protocol: UDP}]}
  - {name: b, ports: [{port: 81, nodePort: 31081}]}
`, nil)
	got := cfg.NodePortInput()
	wantIn := hostcheck.NodePortInput{
		Range: PortRange{First: 31000, Last: 31999},
		NodePorts: []hostcheck.NodePort{{Port: 31080, Protocol: proxy.TCP, Service: "a"},
			{Port: 31081, Protocol: proxy.TCP, Service: "b"}},
		VIPPorts: []hostcheck.VIPPort{{VIP: netip.MustParseAddr("192.0.2.10"), Port: 80, Protocol: proxy.TCP, Service: "a"},
			{VIP: netip.MustParseAddr("192.0.2.10"), Port: 53, Protocol: proxy.UDP, Service: "a"}},
		NodeAddrs: []netip.Addr{netip.MustParseAddr("198.51.100.1")},
	}
	if !reflect.DeepEqual(got, wantIn) {
		t.Errorf("NodePortInput\n%+v\nwant\n%+v", got, wantIn)
	}
}

func TestErrorsAreFieldErrors(t *testing.T) {
	_, err := Parse([]byte("services: [{name: Bad_Name, ports: [{port: 0}]}]\n"))
	var fe *lb.FieldError
	if !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("errors.As FieldError: %v", err)
	}
	var errs *Errors
	errors.As(err, &errs)
	for _, e := range errs.List {
		if !errors.Is(err, e) {
			t.Errorf("errors.Is does not reach %v", e)
		}
	}
}

func TestSNATDefaultsMethod(t *testing.T) {
	cfg := mustParse(t, `
pools: [{name: p, addresses: ["192.0.2.0/24"]}]
dataplane: {snat: false}
services:
  - {name: a, ports: [{port: 80}]}
  - {name: b, method: nat, ports: [{port: 81}]}
`, nil)
	if cfg.Services[0].Method != proxy.NATNoSNAT || cfg.Services[1].Method != proxy.NAT {
		t.Errorf("methods %v %v", cfg.Services[0].Method, cfg.Services[1].Method)
	}
}

func TestHealthCheckURL(t *testing.T) {
	cfg := mustParse(t, `
pools: [{name: p, addresses: ["192.0.2.0/24"]}]
services:
  - name: a
    ports: [{port: 80}]
    healthCheck: {url: "https://www.example.com:8443/status?full=1", interval: 500ms}
`, nil)
	h := cfg.Services[0].Health
	if h.Type != "https" || h.Host != "www.example.com:8443" || h.Path != "/status?full=1" || h.Timeout != 500*time.Millisecond || h.Expect != 200 {
		t.Errorf("health: %+v", h)
	}
}

// TestNodeHealthCheck: kubernetes.nodeHealthCheck becomes a TCP check with
// the per-service check's defaults (a short interval shortens the timeout).
func TestNodeHealthCheck(t *testing.T) {
	for y, want := range map[string]*lb.HealthCheck{
		"kubernetes: {backendMode: nodeport}\n": nil,
		"kubernetes: {backendMode: nodeport, nodeHealthCheck: {}}\n": {Type: "tcp", Interval: DefaultCheckInterval,
			Timeout: DefaultCheckTimeout, Rise: DefaultRise, Fall: DefaultFall},
		"kubernetes: {backendMode: nodeport, nodeHealthCheck: {interval: 500ms, rise: 1, fall: 4}}\n": {Type: "tcp",
			Interval: 500 * time.Millisecond, Timeout: 500 * time.Millisecond, Rise: 1, Fall: 4},
	} {
		cfg := mustParse(t, y, nil)
		if !reflect.DeepEqual(cfg.Kubernetes.NodeHealthCheck, want) {
			t.Errorf("%q: got %+v, want %+v", y, cfg.Kubernetes.NodeHealthCheck, want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q: re-validate: %v", y, err)
		}
	}
	// A check changed in code is re-checked.
	cfg := mustParse(t, "kubernetes: {backendMode: nodeport, nodeHealthCheck: {}}\n", nil)
	cfg.Kubernetes.NodeHealthCheck.Type = "http"
	cfg.Kubernetes.NodeHealthCheck.Interval = 0
	assertErrors(t, cfg.Validate(), []want{{"kubernetes.nodeHealthCheck.interval", `"0s": must be more than 0`},
		{"kubernetes.nodeHealthCheck.type", `"http": node checks are TCP connects`}})
}

func TestManyErrorsAtOnce(t *testing.T) {
	y := `
pools:
  - {name: a, addresses: ["192.0.2.0/24"]}
  - {name: a, addresses: ["192.0.2.128/25", "10.0.0.1/8"]}
services:
  - {name: s1, vip: 198.51.100.1, scheduler: fastest, ports: [{port: 99999}]}
  - {name: s2, vip: 192.0.2.5, ports: [{port: 80, nodePort: 80}], method: dr}
dataplane: {mode: fast}
api: {listen: "localhost:80", tokenFile: /none}
announce: {bgp: {localASN: 0, routerID: "::1", peers: []}}
kubernetes: {backendMode: pods}
log: {format: xml}
`
	_, err := parseWith(y, nil)
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatal(err)
	}
	t.Logf("%v", err)
	if len(errs.List) < 14 {
		t.Errorf("only %d errors collected", len(errs.List))
	}
	// Sorted by section and index.
	order := []string{}
	for _, fe := range errs.List {
		order = append(order, fe.Field)
	}
	if !strings.HasPrefix(order[0], "pools[") || !strings.HasPrefix(order[len(order)-1], "log.") {
		t.Errorf("order: %v", order)
	}
}

// selfSigned returns a throwaway certificate and key in PEM.
func selfSigned(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgelb-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}

func TestLiveFlows(t *testing.T) {
	if c := mustParse(t, "api: {}\n", nil); c.API.LiveFlows != LiveFlowsOnDemand {
		t.Errorf("default liveFlows %q", c.API.LiveFlows)
	}
	if c := mustParse(t, "api: {liveFlows: always}\n", nil); c.API.LiveFlows != LiveFlowsAlways {
		t.Errorf("liveFlows always read as %q", c.API.LiveFlows)
	}
}
