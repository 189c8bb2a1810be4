package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/webui"
)

// One validator, three inputs: every case goes through REST (the real echo
// handlers in front of a real engine), the config file (lb/config.Parse)
// and, where the object has the field, a Kubernetes object (IPPool →
// poolFromObject, Service → parseIntent). The verdicts must be identical,
// and a refusal must name the same field in all of them.

type verdictCase struct {
	name  string
	kind  string // pool, vip, backend, weight, host
	value string
	agg   int  // pool: aggregationLength
	ok    bool // the verdict all three must give
	field string
}

var verdictCases = []verdictCase{
	// Pools: address classes (IANA special-purpose registries).
	{"pool documentation TEST-NET-1", "pool", "192.0.2.0/24", 0, true, ""},
	{"pool documentation TEST-NET-2", "pool", "198.51.100.0/24", 0, true, ""},
	{"pool documentation TEST-NET-3", "pool", "203.0.113.0/24", 0, true, ""},
	{"pool documentation IPv6", "pool", "2001:db8::/120", 0, true, ""},
	{"pool private 10/8", "pool", "10.1.0.0/24", 0, true, ""},
	{"pool private 172.16/12", "pool", "172.16.5.0/28", 0, true, ""},
	{"pool private 192.168/16", "pool", "192.168.10.10-192.168.10.20", 0, true, ""},
	{"pool unique-local", "pool", "fd00:1::/120", 0, true, ""},
	{"pool global unicast", "pool", "8.8.8.0/30", 0, true, ""},
	{"pool loopback", "pool", "127.0.0.1/32", 0, false, "addresses[0]"},
	{"pool this-network", "pool", "0.0.0.0/30", 0, false, "addresses[0]"},
	{"pool multicast", "pool", "224.0.0.1/32", 0, false, "addresses[0]"},
	{"pool link-local", "pool", "169.254.1.0/24", 0, false, "addresses[0]"},
	{"pool metadata", "pool", "169.254.169.254/32", 0, false, "addresses[0]"},
	{"pool broadcast", "pool", "255.255.255.255/32", 0, false, "addresses[0]"},
	{"pool reserved 240/4", "pool", "240.0.0.0/30", 0, false, "addresses[0]"},
	{"pool straddles link-local", "pool", "169.253.255.250-169.254.0.5", 0, false, "addresses[0]"},
	{"pool IPv6 loopback", "pool", "::1/128", 0, false, "addresses[0]"},
	{"pool IPv6 unspecified", "pool", "::/128", 0, false, "addresses[0]"},
	{"pool IPv6 link-local", "pool", "fe80::/120", 0, false, "addresses[0]"},
	{"pool IPv6 multicast", "pool", "ff02::1/128", 0, false, "addresses[0]"},
	// Pools: aggregation length.
	{"aggregation 24 on a /24", "pool", "192.0.2.0/24", 24, true, ""},
	{"aggregation 24 on a /25", "pool", "192.0.2.0/25", 24, false, "advertisement.aggregationLength"},
	{"aggregation 24 on a dash range", "pool", "192.0.2.10-192.0.2.20", 24, false, "advertisement.aggregationLength"},
	{"aggregation 64 on IPv4", "pool", "192.0.2.0/24", 64, false, "advertisement.aggregationLength"},
	{"aggregation 120 on IPv6 /120", "pool", "2001:db8::/120", 120, true, ""},
	{"aggregation 129 on IPv6", "pool", "2001:db8::/120", 129, false, "advertisement.aggregationLength"},
	// Pools: serviceAllocation (value: its JSON). Only cases all three
	// inputs judge alike: standalone inputs also refuse valid selectors
	// (lb.ErrStandaloneSelectors), which IPPools accept.
	{"allocation priority", "alloc", `{"priority":7}`, 0, true, ""},
	{"allocation negative priority", "alloc", `{"priority":-1}`, 0, false, "serviceAllocation.priority"},
	{"allocation bad namespace", "alloc", `{"namespaces":["Blue_Team"]}`, 0, false, "serviceAllocation.namespaces[0]"},
	{"allocation bad operator", "alloc", `{"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"Equals","values":["x"]}]}]}`, 0, false,
		"serviceAllocation.serviceSelectors[0].matchExpressions[0].operator"},
	{"allocation In without values", "alloc", `{"namespaceSelectors":[{"matchExpressions":[{"key":"team","operator":"In"}]}]}`, 0, false,
		"serviceAllocation.namespaceSelectors[0].matchExpressions[0].values"},
	{"allocation bad label value", "alloc", `{"serviceSelectors":[{"matchLabels":{"app":"-web"}}]}`, 0, false,
		"serviceAllocation.serviceSelectors[0].matchLabels.app"},
	// VIPs.
	{"vip documentation", "vip", "192.0.2.10", 0, true, ""},
	{"vip documentation IPv6", "vip", "2001:db8::10", 0, true, ""},
	{"vip private", "vip", "10.1.0.5", 0, true, ""},
	{"vip metadata", "vip", "169.254.169.254", 0, false, "vips[0]"},
	{"vip link-local", "vip", "169.254.1.1", 0, false, "vips[0]"},
	{"vip IPv6 link-local", "vip", "fe80::5", 0, false, "vips[0]"},
	{"vip broadcast", "vip", "255.255.255.255", 0, false, "vips[0]"},
	{"vip loopback", "vip", "127.0.0.1", 0, false, "vips[0]"},
	{"vip this-network", "vip", "0.0.0.0", 0, false, "vips[0]"},
	{"vip IPv6 unspecified", "vip", "::", 0, false, "vips[0]"},
	{"vip IPv6 loopback", "vip", "::1", 0, false, "vips[0]"},
	{"vip multicast", "vip", "224.0.0.1", 0, false, "vips[0]"},
	{"vip IPv6 multicast", "vip", "ff02::1", 0, false, "vips[0]"},
	{"vip reserved 240/4", "vip", "240.0.0.1", 0, false, "vips[0]"},
	// Backends.
	{"backend documentation", "backend", "198.51.100.7", 0, true, ""},
	{"backend private", "backend", "10.9.9.9", 0, true, ""},
	{"backend global", "backend", "8.8.8.8", 0, true, ""},
	{"backend loopback", "backend", "127.0.0.1", 0, false, "backends[0].address"},
	{"backend broadcast", "backend", "255.255.255.255", 0, false, "backends[0].address"},
	{"backend metadata", "backend", "169.254.169.254", 0, false, "backends[0].address"},
	{"backend link-local", "backend", "169.254.3.3", 0, false, "backends[0].address"},
	{"backend this-network", "backend", "0.0.0.0", 0, false, "backends[0].address"},
	{"backend multicast", "backend", "239.1.1.1", 0, false, "backends[0].address"},
	{"backend is the service's own VIP", "backend", "192.0.2.10", 0, false, "backends[0].address"},
	// Weights and health-check host.
	{"weight 0 drains", "weight", "0", 0, true, ""},
	{"weight 65535", "weight", "65535", 0, true, ""},
	{"weight 65536", "weight", "65536", 0, false, "backends[0].weight"},
	{"weight 4294967295", "weight", "4294967295", 0, false, "backends[0].weight"},
	{"host name", "host", "www.example.com", 0, true, ""},
	{"host name:port", "host", "www.example.com:8080", 0, true, ""},
	{"host with path and user", "host", "bad host/x@y", 0, false, "healthCheck.host"},
	{"host with user", "host", "u@www.example.com", 0, false, "healthCheck.host"},
	// Health-check timing given as 0 (absent takes the default in all three).
	{"check interval 2s", "interval", "2s", 0, true, ""},
	{"check interval 0s", "interval", "0s", 0, false, "healthCheck.interval"},
	{"check interval -1s", "interval", "-1s", 0, false, "healthCheck.interval"},
}

// verdict is one input's answer: accepted, or the field it refused.
type verdict struct {
	ok    bool
	field string
	msg   string
}

func (v verdict) String() string {
	if v.ok {
		return "ok"
	}
	return "refused " + v.field
}

// The pool services draw from in the REST and YAML runs.
const verdictPoolRanges = `["192.0.2.0/24", "10.1.0.0/24", "2001:db8::/120"]`

func TestOneValidatorVerdicts(t *testing.T) {
	if len(verdictCases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(verdictCases))
	}
	t.Logf("%-34s %-32s %-22s %-22s %-22s %-22s", "case", "value", "field", "REST", "YAML", "k8s")
	for _, c := range verdictCases {
		rest := restVerdict(t, c)
		yaml := yamlVerdict(t, c)
		k8s, has := k8sVerdict(c)
		kstr := "— (no such field)"
		if has {
			kstr = k8s.String()
		}
		t.Logf("%-34s %-32q %-22s %-22s %-22s %-22s", c.name, c.value, c.field, rest, yaml, kstr)
		for _, in := range []struct {
			name string
			v    verdict
			has  bool
		}{{"REST", rest, true}, {"YAML", yaml, true}, {"k8s", k8s, has}} {
			if !in.has {
				continue
			}
			if in.v.ok != c.ok || !c.ok && !strings.HasSuffix(in.v.field, c.field) {
				t.Errorf("%s: %s says %s (%s), want ok=%v field %q", c.name, in.name, in.v, in.v.msg, c.ok, c.field)
			}
		}
	}
}

// body renders the case as the REST JSON body (pool or service).
func (c verdictCase) restBody() (method, path, body string) {
	if c.kind == "pool" {
		adv := ""
		if c.agg != 0 {
			adv = fmt.Sprintf(`,"advertisement":{"aggregationLength":%d}`, c.agg)
		}
		return "POST", "/api/v1/pools", fmt.Sprintf(`{"name":"p","addresses":[%q]%s}`, c.value, adv)
	}
	if c.kind == "alloc" {
		return "POST", "/api/v1/pools", `{"name":"p","addresses":["192.0.2.0/24"],"serviceAllocation":` + c.value + `}`
	}
	vip, backend, weight, health := "192.0.2.10", "198.51.100.7", "1", ""
	switch c.kind {
	case "vip":
		vip = c.value
		if strings.Contains(vip, ":") {
			backend = "2001:db8:1::7"
		}
	case "backend":
		backend = c.value
	case "weight":
		weight = c.value
	case "host":
		health = fmt.Sprintf(`,"healthCheck":{"type":"http","path":"/","host":%q}`, c.value)
	case "interval":
		health = fmt.Sprintf(`,"healthCheck":{"type":"tcp","interval":%q}`, c.value)
	}
	return "PUT", "/api/v1/services/s", fmt.Sprintf(`{"name":"s","vips":[%q],"ports":[{"port":80}],"backends":[{"address":%q,"weight":%s}]%s}`,
		vip, backend, weight, health)
}

func restVerdict(t *testing.T, c verdictCase) verdict {
	t.Helper()
	e, err := engine.NewEngine(store.NewMem(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv, err := webui.New(webui.Options{Manager: e, Token: "t", RateLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	do := func(method, path, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if c.kind != "pool" && c.kind != "alloc" {
		if code, b := do("POST", "/api/v1/pools", `{"name":"base","addresses":`+verdictPoolRanges+`}`); code != http.StatusCreated {
			t.Fatalf("base pool: %d %s", code, b)
		}
	}
	m, p, b := c.restBody()
	code, out := do(m, p, b)
	if code/100 == 2 {
		return verdict{ok: true}
	}
	var eb struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	_ = json.Unmarshal([]byte(out), &eb)
	return verdict{field: eb.Field, msg: fmt.Sprintf("%d %s", code, eb.Error)}
}

func yamlVerdict(t *testing.T, c verdictCase) verdict {
	t.Helper()
	var y string
	if c.kind == "pool" {
		y = fmt.Sprintf("pools:\n- name: p\n  addresses: [%q]\n", c.value)
		if c.agg != 0 {
			y += fmt.Sprintf("  advertisement: {aggregationLength: %d}\n", c.agg)
		}
	} else if c.kind == "alloc" {
		y = "pools:\n- name: p\n  addresses: [192.0.2.0/24]\n  serviceAllocation: " + c.value + "\n"
	} else {
		// The REST body is JSON, which is YAML: the same service, field for field.
		_, _, body := c.restBody()
		y = "pools:\n- name: base\n  addresses: " + verdictPoolRanges + "\nservices:\n- " + body + "\n"
	}
	_, err := config.Parse([]byte(y))
	if err == nil {
		return verdict{ok: true}
	}
	var fe *lb.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: config error without a field: %v", c.name, err)
	}
	// The file writes a single VIP as vip: (vips: for two); the same field.
	field := fe.Field
	if strings.HasSuffix(field, ".vip") {
		field += "s[0]"
	}
	return verdict{field: field, msg: err.Error()}
}

// k8sVerdict converts the case into the Kubernetes object that carries it,
// if any: an IPPool for pools, a LoadBalancer Service's loadBalancerIPs
// annotation for VIPs. Backends, weights and health checks are not in a
// Kubernetes object (EndpointSlices give pod addresses; no weights/checks).
func k8sVerdict(c verdictCase) (verdict, bool) {
	switch c.kind {
	case "pool":
		adv := map[string]any{}
		if c.agg != 0 {
			adv["aggregationLength"] = int64(c.agg)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "edgelb.io/v1alpha1", "kind": "IPPool",
			"metadata": map[string]any{"name": "p"},
			"spec":     map[string]any{"addresses": []any{c.value}, "advertisement": adv},
		}}
		_, err := poolFromObject(u)
		return k8sResult(err), true
	case "alloc":
		var sa map[string]any
		if err := utiljson.Unmarshal([]byte(c.value), &sa); err != nil {
			return verdict{field: "?", msg: err.Error()}, true
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "edgelb.io/v1alpha1", "kind": "IPPool",
			"metadata": map[string]any{"name": "p"},
			"spec":     map[string]any{"addresses": []any{"192.0.2.0/24"}, "serviceAllocation": sa},
		}}
		_, err := poolFromObject(u)
		return k8sResult(err), true
	case "vip":
		fam := corev1.IPv4Protocol
		if strings.Contains(c.value, ":") {
			fam = corev1.IPv6Protocol
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default",
				Annotations: map[string]string{AnnotationIPs: c.value}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{fam},
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		_, err := parseIntent(svc)
		v := k8sResult(err)
		if !v.ok && strings.HasPrefix(v.field, "metadata.annotations[") {
			v.field = "vips[0]" // the annotation is the Service's vips
		}
		return v, true
	}
	return verdict{}, false
}

func k8sResult(err error) verdict {
	if err == nil {
		return verdict{ok: true}
	}
	var fe *lb.FieldError
	if errors.As(err, &fe) {
		return verdict{field: fe.Field, msg: err.Error()}
	}
	return verdict{field: "?", msg: err.Error()}
}
