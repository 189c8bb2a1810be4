package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/migrate/keepalived"
	"github.com/edgelb/edgelb/lb/migrate/metallb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy/nft"
	"github.com/edgelb/edgelb/webui"
)

// One schema, one validator, four inputs (issue 34): every case is one
// JSON object in lb's input schema (a service or a pool), and it goes
//   - REST: the real echo handlers in front of a real engine (PUT/POST);
//   - YAML: a config file holding it, through config.Parse;
//   - IPPool (pools): an IPPool object with it as spec, through poolFromObject;
//   - Service (VIPs): a LoadBalancer Service asking for the case's one VIP
//     in its loadBalancerIPs annotation, through parseIntent;
//   - migrate: decoded into the schema's Go struct and written out as
//     `edgelb migrate` writes (keepalived's config for services, metallb's
//     standalone config for pools), then through config.Parse.
// The verdicts must be the same everywhere, and a refusal must name the
// same field, relative to the object (YAML's services[1]. and the IPPool's
// spec. prefixes are taken off). The table is printed.

type vcase struct {
	name string
	kind string // svc, pool, svc2 (a second service beside vFirst)
	body string // the object, JSON (= YAML)
	ok   bool
	// field refused, relative to the object.
	field string
}

// The pool services draw from, and the service a svc2 case comes second to.
const (
	vBase  = `{"name":"base","addresses":["192.0.2.0/24","10.1.0.0/24","2001:db8::/120"]}`
	vFirst = `{"name":"a","vips":["192.0.2.10"],"sharingKey":"k","ports":[{"port":80},{"port":30,"nodePort":30080}],"backends":[{"address":"198.51.100.7"}]}`
)

// svc renders a service: a default one with the given members replaced
// (a null value removes the member).
func svc(over string) string {
	m := map[string]any{}
	_ = json.Unmarshal([]byte(`{"name":"s","vips":["192.0.2.10"],"ports":[{"port":80}],"backends":[{"address":"198.51.100.7"}]}`), &m)
	o := map[string]any{}
	if err := json.Unmarshal([]byte("{"+over+"}"), &o); err != nil {
		panic(over + ": " + err.Error())
	}
	for k, v := range o {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func be(addr string) string { return fmt.Sprintf(`"backends":[{"address":%q}]`, addr) }
func vip(addr string) string {
	if strings.Contains(addr, ":") && !strings.Contains(addr, ".") {
		// An IPv6 VIP: an IPv6 backend keeps the service consistent.
		return fmt.Sprintf(`"vips":[%q],"backends":[{"address":"2001:db8:1::7"}]`, addr)
	}
	return fmt.Sprintf(`"vips":[%q]`, addr)
}
func hc(h string) string { return `"healthCheck":` + h }
func pool(addrs string) string {
	return fmt.Sprintf(`{"name":"p","addresses":[%s]}`, addrs)
}

var vcases = []vcase{
	// Backends: address:port forms.
	{"backend addr:port", "svc", svc(be("198.51.100.11:8000")), true, ""},
	{"backend [v6]:port", "svc", svc(`"vips":["192.0.2.10","2001:db8::10"],` + be("[2001:db8:1::7]:8080")), true, ""},
	{"backend addr + port field", "svc", svc(`"backends":[{"address":"198.51.100.11","port":8000}]`), true, ""},
	{"backend addr:port + port field", "svc", svc(`"backends":[{"address":"198.51.100.11:8000","port":8001}]`), false, "backends[0].port"},
	{"backend addr:0", "svc", svc(be("198.51.100.11:0")), false, "backends[0].address"},
	{"backend addr:99999", "svc", svc(be("198.51.100.11:99999")), false, "backends[0].address"},
	{"backend v6 without brackets", "svc", svc(be("2001:db8:1::7:8080")), false, "backends[0].address"},
	{"backend zone", "svc", svc(be("fe80::1%eth0")), false, "backends[0].address"},
	{"backend empty", "svc", svc(be("")), false, "backends[0].address"},
	{"backend host name", "svc", svc(be("www.example.com:80")), false, "backends[0].address"},
	{"backend port 70000", "svc", svc(`"backends":[{"address":"198.51.100.11","port":70000}]`), false, "backends[0].port"},
	{"backend twice", "svc", svc(`"backends":[{"address":"198.51.100.11:80"},{"address":"198.51.100.11","port":80}]`), false, "backends[1].address"},
	{"vip addr:port", "svc", svc(vip("192.0.2.10:8000")), false, "vips[0]"},
	{"vip single spelling", "svc", svc(`"vips":null,"vip":"192.0.2.10"`), true, ""},
	{"vip single spelling addr:port", "svc", svc(`"vips":null,"vip":"192.0.2.10:80"`), false, "vip"},
	{"vip and vips", "svc", svc(`"vip":"192.0.2.11"`), false, "vip"},
	// VIPs: address classes.
	{"vip documentation", "svc", svc(vip("192.0.2.10")), true, ""},
	{"vip documentation IPv6", "svc", svc(vip("2001:db8::10")), true, ""},
	{"vip private", "svc", svc(vip("10.1.0.5")), true, ""},
	{"vip IPv4-mapped", "svc", svc(vip("::ffff:192.0.2.10")), true, ""},
	{"vip IPv4-mapped loopback", "svc", svc(vip("::ffff:127.0.0.1")), false, "vips[0]"},
	{"vip metadata", "svc", svc(vip("169.254.169.254")), false, "vips[0]"},
	{"vip link-local", "svc", svc(vip("169.254.1.1")), false, "vips[0]"},
	{"vip IPv6 link-local", "svc", svc(vip("fe80::5")), false, "vips[0]"},
	{"vip broadcast", "svc", svc(vip("255.255.255.255")), false, "vips[0]"},
	{"vip loopback", "svc", svc(vip("127.0.0.1")), false, "vips[0]"},
	{"vip unspecified", "svc", svc(vip("0.0.0.0")), false, "vips[0]"},
	{"vip IPv6 unspecified", "svc", svc(vip("::")), false, "vips[0]"},
	{"vip IPv6 loopback", "svc", svc(vip("::1")), false, "vips[0]"},
	{"vip multicast", "svc", svc(vip("224.0.0.1")), false, "vips[0]"},
	{"vip IPv6 multicast", "svc", svc(vip("ff02::1")), false, "vips[0]"},
	{"vip reserved 240/4", "svc", svc(vip("240.0.0.1")), false, "vips[0]"},
	{"vip outside every pool", "svc", svc(vip("203.0.113.5")), false, "vips[0]"},
	// Backends: address classes and own addresses.
	{"backend documentation", "svc", svc(be("198.51.100.7")), true, ""},
	{"backend private", "svc", svc(be("10.9.9.9")), true, ""},
	{"backend global", "svc", svc(be("8.8.8.8")), true, ""},
	{"backend IPv4-mapped", "svc", svc(be("::ffff:198.51.100.7")), true, ""},
	{"backend IPv4-mapped loopback", "svc", svc(be("::ffff:127.0.0.1")), false, "backends[0].address"},
	{"backend loopback", "svc", svc(be("127.0.0.1")), false, "backends[0].address"},
	{"backend broadcast", "svc", svc(be("255.255.255.255")), false, "backends[0].address"},
	{"backend metadata", "svc", svc(be("169.254.169.254")), false, "backends[0].address"},
	{"backend link-local", "svc", svc(be("169.254.3.3")), false, "backends[0].address"},
	{"backend unspecified", "svc", svc(be("0.0.0.0")), false, "backends[0].address"},
	{"backend multicast", "svc", svc(be("239.1.1.1")), false, "backends[0].address"},
	{"backend is the service's own VIP", "svc", svc(be("192.0.2.10")), false, "backends[0].address"},
	{"backend is another service's VIP", "svc2", svc(`"vips":["192.0.2.20"],` + be("192.0.2.10")), false, "backends[0].address"},
	// Schedulers.
	{"scheduler rr", "svc", svc(`"scheduler":"rr"`), true, ""},
	{"scheduler wrr", "svc", svc(`"scheduler":"wrr"`), true, ""},
	{"scheduler lc", "svc", svc(`"scheduler":"lc"`), true, ""},
	{"scheduler wlc", "svc", svc(`"scheduler":"wlc"`), true, ""},
	{"scheduler sh", "svc", svc(`"scheduler":"sh"`), true, ""},
	{"scheduler dh", "svc", svc(`"scheduler":"dh"`), true, ""},
	{"scheduler sed", "svc", svc(`"scheduler":"sed"`), true, ""},
	{"scheduler nq", "svc", svc(`"scheduler":"nq"`), true, ""},
	{"scheduler mh", "svc", svc(`"scheduler":"mh"`), true, ""},
	{"scheduler fastest", "svc", svc(`"scheduler":"fastest"`), false, "scheduler"},
	{"scheduler RR", "svc", svc(`"scheduler":"RR"`), false, "scheduler"},
	// Weights.
	{"weight 0 drains", "svc", svc(`"backends":[{"address":"198.51.100.7","weight":0}]`), true, ""},
	{"weight 65535", "svc", svc(`"backends":[{"address":"198.51.100.7","weight":65535}]`), true, ""},
	{"weight 65536", "svc", svc(`"backends":[{"address":"198.51.100.7","weight":65536}]`), false, "backends[0].weight"},
	{"weight -1", "svc", svc(`"backends":[{"address":"198.51.100.7","weight":-1}]`), false, "backends[0].weight"},
	{"weight 4294967295", "svc", svc(`"backends":[{"address":"198.51.100.7","weight":4294967295}]`), false, "backends[0].weight"},
	// Health checks.
	{"check tcp", "svc", svc(hc(`{"type":"tcp"}`)), true, ""},
	{"check defaults", "svc", svc(hc(`{}`)), true, ""},
	{"check http path", "svc", svc(hc(`{"type":"http","path":"/healthz","expectStatus":204}`)), true, ""},
	{"check url", "svc", svc(hc(`{"url":"http://www.example.com/healthz"}`)), true, ""},
	{"check url ftp", "svc", svc(hc(`{"url":"ftp://www.example.com/"}`)), false, "healthCheck.url"},
	{"check url and path", "svc", svc(hc(`{"url":"http://x/","path":"/y"}`)), false, "healthCheck.url"},
	{"check path without /", "svc", svc(hc(`{"type":"http","path":"healthz"}`)), false, "healthCheck.path"},
	{"check URL in path", "svc", svc(hc(`{"type":"http","path":"http://svc/healthz"}`)), false, "healthCheck.path"},
	{"check host name:port", "svc", svc(hc(`{"type":"http","host":"www.example.com:8080"}`)), true, ""},
	{"check host with user", "svc", svc(hc(`{"type":"http","host":"u@www.example.com"}`)), false, "healthCheck.host"},
	{"check interval 2s", "svc", svc(hc(`{"interval":"2s"}`)), true, ""},
	{"check interval 0s", "svc", svc(hc(`{"interval":"0s"}`)), false, "healthCheck.interval"},
	{"check interval -1s", "svc", svc(hc(`{"interval":"-1s"}`)), false, "healthCheck.interval"},
	{"check timeout past interval", "svc", svc(hc(`{"interval":"1s","timeout":"2s"}`)), false, "healthCheck.timeout"},
	{"check rise 0", "svc", svc(hc(`{"rise":0}`)), false, "healthCheck.rise"},
	{"check fall 1001", "svc", svc(hc(`{"fall":1001}`)), false, "healthCheck.fall"},
	{"check expectStatus 99", "svc", svc(hc(`{"type":"http","expectStatus":99}`)), false, "healthCheck.expectStatus"},
	{"check type icmp", "svc", svc(hc(`{"type":"icmp"}`)), false, "healthCheck.type"},
	{"check tcp with path", "svc", svc(hc(`{"type":"tcp","path":"/x"}`)), false, "healthCheck.type"},
	{"check port 0 given", "svc", svc(hc(`{"port":70000}`)), false, "healthCheck.port"},
	// Affinity.
	{"affinity ClientIP", "svc", svc(`"affinity":{"type":"ClientIP"}`), true, ""},
	{"affinity ClientIP 30m", "svc", svc(`"affinity":{"type":"ClientIP","timeout":"30m"}`), true, ""},
	{"affinity None", "svc", svc(`"affinity":{"type":"None"}`), true, ""},
	{"affinity 25h", "svc", svc(`"affinity":{"type":"ClientIP","timeout":"25h"}`), false, "affinity.timeout"},
	{"affinity 500ms", "svc", svc(`"affinity":{"type":"ClientIP","timeout":"500ms"}`), false, "affinity.timeout"},
	{"affinity 0s", "svc", svc(`"affinity":{"type":"ClientIP","timeout":"0s"}`), false, "affinity.timeout"},
	{"affinity type Sticky", "svc", svc(`"affinity":{"type":"Sticky"}`), false, "affinity.type"},
	{"affinity None with timeout", "svc", svc(`"affinity":{"type":"None","timeout":"1h"}`), false, "affinity.timeout"},
	{"affinity old spelling", "svc", svc(`"affinityTimeout":"30m"`), true, ""},
	{"affinity old spelling bad", "svc", svc(`"affinityTimeout":"forever"`), false, "affinityTimeout"},
	// Ports and protocols.
	{"port 0", "svc", svc(`"ports":[{"port":0}]`), false, "ports[0].port"},
	{"port 65536", "svc", svc(`"ports":[{"port":65536}]`), false, "ports[0].port"},
	{"no ports", "svc", svc(`"ports":[]`), false, "ports"},
	{"port twice", "svc", svc(`"ports":[{"port":80},{"port":80,"protocol":"tcp"}]`), false, "ports[1].port"},
	{"port TCP and UDP", "svc", svc(`"ports":[{"port":53},{"port":53,"protocol":"UDP"}]`), true, ""},
	{"protocol udp", "svc", svc(`"ports":[{"port":53,"protocol":"udp"}]`), true, ""},
	{"protocol SCTP", "svc", svc(`"ports":[{"port":80,"protocol":"SCTP"}]`), false, "ports[0].protocol"},
	{"node port in range", "svc", svc(`"ports":[{"port":80,"nodePort":30081}]`), true, ""},
	{"node port outside range", "svc", svc(`"ports":[{"port":80,"nodePort":8080}]`), false, "ports[0].nodePort"},
	{"target port", "svc", svc(`"ports":[{"port":80,"targetPort":8080}]`), true, ""},
	{"port name bad", "svc", svc(`"ports":[{"port":80,"name":"HTTP"}]`), false, "ports[0].name"},
	{"method dr", "svc", svc(`"method":"dr"`), true, ""},
	{"method dr maps ports", "svc", svc(`"method":"dr","ports":[{"port":80,"targetPort":8080}]`), false, "ports[0].targetPort"},
	{"method magic", "svc", svc(`"method":"magic"`), false, "method"},

	// Schedulers and methods per dataplane (a case named "nftables: ..."
	// runs with the nftables dataplane: the config file's dataplane.mode,
	// the engine's Check; "ipvs: ..." with IPVS, which does them all).
	{"nftables: scheduler rr", "svc", svc(`"scheduler":"rr"`), true, ""},
	{"nftables: scheduler wrr", "svc", svc(`"scheduler":"wrr"`), true, ""},
	{"nftables: scheduler sh", "svc", svc(`"scheduler":"sh"`), true, ""},
	{"nftables: scheduler dh", "svc", svc(`"scheduler":"dh"`), true, ""},
	{"nftables: scheduler mh", "svc", svc(`"scheduler":"mh"`), true, ""},
	{"nftables: scheduler lc", "svc", svc(`"scheduler":"lc"`), false, "scheduler"},
	{"nftables: scheduler wlc", "svc", svc(`"scheduler":"wlc"`), false, "scheduler"},
	{"nftables: scheduler sed", "svc", svc(`"scheduler":"sed"`), false, "scheduler"},
	{"nftables: scheduler nq", "svc", svc(`"scheduler":"nq"`), false, "scheduler"},
	{"nftables: method nat-nosnat", "svc", svc(`"method":"nat-nosnat"`), true, ""},
	{"nftables: method dr", "svc", svc(`"method":"dr"`), false, "method"},
	{"nftables: method tunnel", "svc", svc(`"method":"tunnel"`), false, "method"},
	{"ipvs: scheduler lc", "svc", svc(`"scheduler":"lc"`), true, ""},
	{"ipvs: scheduler nq", "svc", svc(`"scheduler":"nq"`), true, ""},
	{"ipvs: method dr", "svc", svc(`"method":"dr"`), true, ""},
	{"ipvs: method tunnel", "svc", svc(`"method":"tunnel"`), true, ""},
	// Dual stack.
	{"dual-stack vips", "svc", svc(`"vips":["192.0.2.10","2001:db8::10"],"backends":[{"address":"198.51.100.7"},{"address":"2001:db8:1::7"}]`), true, ""},
	{"two IPv4 vips", "svc", svc(`"vips":["192.0.2.10","192.0.2.11"]`), false, "vips[1]"},
	{"dual-stack families", "svc", svc(`"vips":null,"families":["IPv4","IPv6"],"backends":[{"address":"2001:db8:1::7"}]`), true, ""},
	{"families and vips", "svc", svc(`"families":["IPv4"]`), false, "families"},
	{"family IPv5", "svc", svc(`"vips":null,"families":["IPv5"]`), false, "families[0]"},
	{"family twice", "svc", svc(`"vips":null,"families":["IPv4","ipv4"]`), false, "families[1]"},
	{"IPv6 backend, IPv4 service", "svc", svc(be("2001:db8:1::7")), false, "backends[0].address"},
	// Against another service.
	{"same VIP:port, same key", "svc2", svc(`"sharingKey":"k"`), false, "vips[0]"},
	{"same VIP, no key", "svc2", svc(`"ports":[{"port":81}]`), false, "vips[0]"},
	{"same VIP, same key, other port", "svc2", svc(`"sharingKey":"k","ports":[{"port":81}]`), true, ""},
	{"node port taken", "svc2", svc(`"vips":["192.0.2.20"],"ports":[{"port":80,"nodePort":30080}]`), false, "ports[0].nodePort"},
	// The document itself.
	{"unknown field", "svc", svc(`"colour":"blue"`), false, "colour"},
	{"unknown nested field", "svc", svc(`"ports":[{"port":80,"colour":1}]`), false, "ports[0].colour"},
	{"port as a string", "svc", svc(`"ports":[{"port":"eighty"}]`), false, "ports[0].port"},
	{"bad name", "svc", svc(`"name":"Bad_Name"`), false, "name"},

	// Pools: address classes (IANA special-purpose registries).
	{"pool documentation TEST-NET-1", "pool", pool(`"192.0.2.0/24"`), true, ""},
	{"pool documentation TEST-NET-2", "pool", pool(`"198.51.100.0/24"`), true, ""},
	{"pool documentation IPv6", "pool", pool(`"2001:db8::/120"`), true, ""},
	{"pool private 192.168/16 range", "pool", pool(`"192.168.10.10-192.168.10.20"`), true, ""},
	{"pool unique-local", "pool", pool(`"fd00:1::/120"`), true, ""},
	{"pool IPv4-mapped range", "pool", pool(`"::ffff:192.0.2.0/120"`), true, ""},
	{"pool single address", "pool", pool(`"192.0.2.7"`), true, ""},
	{"pool loopback", "pool", pool(`"127.0.0.1/32"`), false, "addresses[0]"},
	{"pool this-network", "pool", pool(`"0.0.0.0/30"`), false, "addresses[0]"},
	{"pool multicast", "pool", pool(`"224.0.0.1/32"`), false, "addresses[0]"},
	{"pool link-local", "pool", pool(`"169.254.1.0/24"`), false, "addresses[0]"},
	{"pool broadcast", "pool", pool(`"255.255.255.255/32"`), false, "addresses[0]"},
	{"pool straddles link-local", "pool", pool(`"169.253.255.250-169.254.0.5"`), false, "addresses[0]"},
	{"pool IPv6 unspecified", "pool", pool(`"::/128"`), false, "addresses[0]"},
	{"pool IPv6 link-local", "pool", pool(`"fe80::/120"`), false, "addresses[0]"},
	{"pool IPv6 multicast", "pool", pool(`"ff02::1/128"`), false, "addresses[0]"},
	{"pool host bits", "pool", pool(`"192.0.2.1/24"`), false, "addresses[0]"},
	{"pool reaches IPv4-mapped", "pool", pool(`"::fffe:ffff:ffff:ff00-::ffff:0.0.0.5"`), false, "addresses[0]"},
	{"pool overlap inside", "pool", pool(`"192.0.2.0/24","192.0.2.7"`), false, "addresses[1]"},
	{"pool no addresses", "pool", pool(``), false, "addresses"},
	{"pool bad name", "pool", `{"name":"P_1","addresses":["192.0.2.0/24"]}`, false, "name"},
	// Pools: BGP attributes.
	{"aggregation 24 on a /24", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"aggregationLength":24}}`, true, ""},
	{"aggregation 24 on a /25", "pool", `{"name":"p","addresses":["192.0.2.0/25"],"advertisement":{"aggregationLength":24}}`, false, "advertisement.aggregationLength"},
	{"aggregation 64 on IPv4", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"aggregationLength":64}}`, false, "advertisement.aggregationLength"},
	{"aggregation 129 on IPv6", "pool", `{"name":"p","addresses":["2001:db8::/120"],"advertisement":{"aggregationLength":129}}`, false, "advertisement.aggregationLength"},
	{"community 65000:100", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"communities":["65000:100","no-export"]}}`, true, ""},
	{"community 65000:70000", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"communities":["65000:70000"]}}`, false, "advertisement.communities[0]"},
	{"large community", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"largeCommunities":["1:2"]}}`, false, "advertisement.largeCommunities[0]"},
	{"localPref 2^32", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"advertisement":{"localPref":4294967296}}`, false, "advertisement.localPref"},
	// Pools: serviceAllocation (standalone inputs also refuse valid
	// selectors, which IPPools accept: only cases all judge alike).
	{"allocation priority", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"serviceAllocation":{"priority":7}}`, true, ""},
	{"allocation negative priority", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"serviceAllocation":{"priority":-1}}`, false, "serviceAllocation.priority"},
	{"allocation bad namespace", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"serviceAllocation":{"namespaces":["Blue_Team"]}}`, false, "serviceAllocation.namespaces[0]"},
	{"allocation bad operator", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"serviceAllocation":{"serviceSelectors":[{"matchExpressions":[{"key":"app","operator":"Equals","values":["x"]}]}]}}`, false,
		"serviceAllocation.serviceSelectors[0].matchExpressions[0].operator"},
	{"pool unknown field", "pool", `{"name":"p","addresses":["192.0.2.0/24"],"colour":1}`, false, "colour"},
	// The gateway's own addresses (issue 36; vOwnYAML declares them to
	// every input): refused, the reason naming them.
	{"vip own address", "svc", svc(vip("203.0.113.50")), false, "vips[0]"},
	{"vip own IPv6 address", "svc", svc(vip("2001:db8:ff::50")), false, "vips[0]"},
	{"backend own address", "svc", svc(be("203.0.113.50")), false, "backends[0].address"},
	{"backend own address:port", "svc", svc(be("203.0.113.50:8080")), false, "backends[0].address"},
	{"backend own IPv6 address:port", "svc", svc(`"vips":["192.0.2.10","2001:db8::10"],` + be("[2001:db8:ff::50]:8080")), false, "backends[0].address"},
	{"backend beside an own address", "svc", svc(be("203.0.113.51")), true, ""},
	{"pool holding an own address", "pool", pool(`"203.0.113.0/24"`), false, "addresses[0]"},
	{"pool = an own address", "pool", pool(`"203.0.113.50"`), false, "addresses[0]"},
	{"pool holding an own IPv6 address", "pool", pool(`"2001:db8:ff::/120"`), false, "addresses[0]"},
	{"pool beside an own address", "pool", pool(`"203.0.113.51-203.0.113.60"`), true, ""},
	{"pool second range an own address", "pool", pool(`"192.0.2.0/24","203.0.113.50/32"`), false, "addresses[1]"},
}

// vOwnYAML makes 203.0.113.50 and 2001:db8:ff::50 the gateway's own
// addresses in every input: appended to each config file (YAML, migrate),
// and the same file's config.OwnAddrs for REST (the engine), IPPools and
// Services (the controller's Options.OwnAddrs).
const vOwnYAML = "dataplane: {nodeAddresses: [\"203.0.113.50\", \"2001:db8:ff::50\"]}\n"

// vDataplane is a case's dataplane ("nftables: ...", "ipvs: ..."; "" for
// the rest) and the config file's dataplane section for it.
func vDataplane(name string) (mode, yaml string) {
	mode, _, ok := strings.Cut(name, ": ")
	if !ok || mode != "nftables" && mode != "ipvs" {
		return "", vOwnYAML
	}
	return mode, "dataplane: {mode: " + mode + ", nodeAddresses: [\"203.0.113.50\", \"2001:db8:ff::50\"]}\n"
}

func vOwn() *lb.OwnAddrs {
	c, err := config.Parse([]byte(vOwnYAML))
	if err != nil {
		panic(err)
	}
	return c.OwnAddrs()
}

// verdict is one input's answer: accepted, or the field it refused.
type verdict struct {
	ok    bool
	field string
	msg   string
	na    bool // this input cannot carry the case
}

func (v verdict) String() string {
	switch {
	case v.na:
		return "—"
	case v.ok:
		return "ok"
	}
	return "refused " + v.field
}

func TestOneSchemaVerdicts(t *testing.T) {
	if len(vcases) < 80 {
		t.Fatalf("%d cases, want at least 80", len(vcases))
	}
	names := map[string]bool{}
	counts := map[string]int{}
	t.Logf("%-36s %-8s %-30s %-30s %-30s %-30s %-30s", "case", "expect", "REST", "YAML", "IPPool", "Service", "migrate")
	for _, c := range vcases {
		if names[c.name] {
			t.Fatalf("case %q twice", c.name)
		}
		names[c.name] = true
		ins := []struct {
			name string
			v    verdict
		}{{"REST", restVerdict(t, c)}, {"YAML", yamlVerdict(t, c)}, {"IPPool", ippoolVerdict(c)}, {"Service", serviceVerdict(c)}, {"migrate", migrateVerdict(t, c)}}
		want := "ok"
		if !c.ok {
			want = "refused"
		}
		t.Logf("%-36s %-8s %-30s %-30s %-30s %-30s %-30s", c.name, want, ins[0].v, ins[1].v, ins[2].v, ins[3].v, ins[4].v)
		for _, in := range ins {
			if in.v.na {
				continue
			}
			counts[in.name]++
			if (strings.Contains(c.name, "own address") || strings.Contains(c.name, "own IPv6")) && !c.ok && !strings.Contains(in.v.msg, "this gateway's own address") {
				t.Errorf("%s: %s refuses it for another reason: %s", c.name, in.name, in.v.msg)
			}
			if in.v.ok != c.ok || !c.ok && in.v.field != c.field {
				t.Errorf("%s: %s says %s (%s), want ok=%v field %q", c.name, in.name, in.v, in.v.msg, c.ok, c.field)
			}
		}
	}
	var sum []string
	for k, n := range counts {
		sum = append(sum, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(sum)
	t.Logf("MEASURED verdict table: %d cases; judged by %s; every judged verdict and error path agrees: %v", len(vcases), strings.Join(sum, ", "), !t.Failed())
}

func restVerdict(t *testing.T, c vcase) verdict {
	t.Helper()
	o := engine.Options{OwnAddrs: vOwn()}
	if mode, _ := vDataplane(c.name); mode == "nftables" { // as cmd/edgelb wires the engine for it
		o.Check = nft.Check
	}
	e, err := engine.NewEngine(store.NewMem(), o)
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
	var code int
	var out string
	switch c.kind {
	case "pool":
		code, out = do("POST", "/api/v1/pools", c.body)
	default:
		if code, b := do("POST", "/api/v1/pools", vBase); code != http.StatusCreated {
			t.Fatalf("base pool: %d %s", code, b)
		}
		if c.kind == "svc2" {
			if code, b := do("PUT", "/api/v1/services/a", vFirst); code/100 != 2 {
				t.Fatalf("first service: %d %s", code, b)
			}
		}
		var name struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(c.body), &name)
		code, out = do("PUT", "/api/v1/services/"+name.Name, c.body)
	}
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

// fileVerdict parses a config file and reports the first error of the
// case's object (at prefix), its path relative to the object.
func fileVerdict(t *testing.T, name string, y []byte, prefix string) verdict {
	t.Helper()
	_, dp := vDataplane(name)
	_, err := config.Parse(append(y, dp...))
	if err == nil {
		return verdict{ok: true}
	}
	var errs *config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("%s: config error that is not *config.Errors: %v", name, err)
	}
	for _, fe := range errs.List {
		if rest, ok := strings.CutPrefix(fe.Field, prefix); ok {
			return verdict{field: strings.TrimPrefix(rest, "."), msg: err.Error()}
		}
	}
	return verdict{field: errs.List[0].Field, msg: err.Error()}
}

func yamlVerdict(t *testing.T, c vcase) verdict {
	t.Helper()
	switch c.kind {
	case "pool":
		// JSON is YAML: the same object, field for field.
		return fileVerdict(t, c.name, []byte("pools:\n- "+c.body+"\n"), "pools[0]")
	case "svc2":
		return fileVerdict(t, c.name, []byte("pools:\n- "+vBase+"\nservices:\n- "+vFirst+"\n- "+c.body+"\n"), "services[1]")
	}
	return fileVerdict(t, c.name, []byte("pools:\n- "+vBase+"\nservices:\n- "+c.body+"\n"), "services[0]")
}

// ippoolVerdict: a pool case as an IPPool object's spec.
func ippoolVerdict(c vcase) verdict {
	if c.kind != "pool" {
		return verdict{na: true}
	}
	spec := map[string]any{}
	if err := json.Unmarshal([]byte(c.body), &spec); err != nil {
		return verdict{field: "?", msg: err.Error()}
	}
	name, _ := spec["name"].(string)
	delete(spec, "name")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "edgelb.io/v1alpha1", "kind": "IPPool",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	_, err := poolFromObject(u, vOwn())
	if err == nil {
		return verdict{ok: true}
	}
	var fe *lb.FieldError
	if !errors.As(err, &fe) {
		return verdict{field: "?", msg: err.Error()}
	}
	return verdict{field: strings.TrimPrefix(fe.Field, "spec."), msg: err.Error()}
}

// serviceVerdict: a VIP case ("vip ..." with one VIP in vips) as a
// LoadBalancer Service's loadBalancerIPs annotation.
func serviceVerdict(c vcase) verdict {
	var in struct {
		VIPs []string `json:"vips"`
	}
	if !strings.HasPrefix(c.name, "vip ") || strings.Contains(c.body, `"vip":`) || json.Unmarshal([]byte(c.body), &in) != nil ||
		len(in.VIPs) != 1 || c.name == "vip outside every pool" {
		return verdict{na: true}
	}
	fam := corev1.IPv4Protocol
	if strings.Contains(in.VIPs[0], ":") && !strings.Contains(in.VIPs[0], ".") {
		fam = corev1.IPv6Protocol
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default", Annotations: map[string]string{AnnotationIPs: in.VIPs[0]}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{fam},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	_, err := parseIntent(svc, vOwn())
	if err == nil {
		return verdict{ok: true}
	}
	var fe *lb.FieldError
	if !errors.As(err, &fe) {
		return verdict{field: "?", msg: err.Error()}
	}
	field := fe.Field
	if strings.HasPrefix(field, "metadata.annotations[") {
		field = "vips[0]" // the annotation is the Service's vips
	}
	return verdict{field: field, msg: err.Error()}
}

// migrateVerdict: the case decoded into the schema's Go struct (what a
// converter fills in) and written out as `edgelb migrate` writes. A case
// the struct cannot hold (an unknown field, a wrong type) is not one a
// converter can write.
func migrateVerdict(t *testing.T, c vcase) verdict {
	t.Helper()
	if c.kind == "pool" {
		var p metallb.Pool
		if lb.DecodeStrict([]byte(c.body), &p) != nil || p.ServiceAllocation != nil && p.ServiceAllocation.HasSelectors() {
			// metallb's standalone config keeps only the priority of a
			// serviceAllocation (the report says so).
			return verdict{na: true}
		}
		y, err := (&metallb.Result{Pools: []metallb.Pool{p}}).Config()
		if err != nil {
			t.Fatal(err)
		}
		return fileVerdict(t, c.name, y, "pools[0]")
	}
	var base lb.PoolInput
	var first, s lb.ServiceInput
	if err := lb.DecodeStrict([]byte(vBase), &base); err != nil {
		t.Fatal(err)
	}
	if err := lb.DecodeStrict([]byte(vFirst), &first); err != nil {
		t.Fatal(err)
	}
	if lb.DecodeStrict([]byte(c.body), &s) != nil {
		return verdict{na: true}
	}
	cfg := keepalived.Config{Pools: []lb.PoolInput{base}}
	prefix := "services[0]"
	if c.kind == "svc2" {
		cfg.Services = append(cfg.Services, first)
		prefix = "services[1]"
	}
	cfg.Services = append(cfg.Services, s)
	y, err := (&keepalived.Result{Config: cfg}).YAML()
	if err != nil {
		t.Fatal(err)
	}
	return fileVerdict(t, c.name, y, prefix)
}
