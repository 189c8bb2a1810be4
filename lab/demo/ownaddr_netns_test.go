//go:build netns

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/edgelb/edgelb/lab/netns"
)

// The own-address lab: the API listens on the front address, memberlist
// binds there too, BGP names a router ID on no interface and a session
// source on the backend bridge; lo carries an extra address and the front
// veth an IPv6 one. Node ports listen on a second front address that no
// attempt uses, so none of the attempted addresses has any business in
// edgelb's nftables table.
const (
	ownAPI      = "192.0.2.1:8080"
	ownNodeAddr = "192.0.2.2"
	ownLo       = "10.255.0.2"
	ownRouterID = "10.255.0.1"
	ownV6       = "2001:db8:f::1"
	ownLate     = "192.0.2.110" // in the pool; an interface address later
	ownLateBe   = "198.51.100.77"
)

func ownConfig(l *Lab, state, token string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `pools:
  - {name: demo, addresses: [%q, "2001:db8:100::/120"]}
services:
  - name: web
    pool: demo
    ports: [{name: http, port: 80, targetPort: %d}]
    backends:
`, PoolRange, BackendPort)
	for _, be := range l.Backends {
		fmt.Fprintf(&b, "      - {address: %q}\n", be.Addr.Addr())
	}
	fmt.Fprintf(&b, `announce:
  l2:
    interface: %s
    members: {bindAddress: "192.0.2.1", port: 7946}
  bgp:
    localASN: 65001
    routerID: %s
    peers: [{address: 198.51.100.250, asn: 65002, sourceAddress: 198.51.100.1}]
dataplane:
  mode: nftables
  nodeAddresses: [%q]
api:
  listen: %s
  tokenFile: %s
state:
  dir: %s
`, l.FrontIf, ownRouterID, ownNodeAddr, ownAPI, token, state)
	return b.String()
}

// ownAttempt is one self-harm attempt through the REST API.
type ownAttempt struct {
	name, method, path, body string
	addr                     string // the own address that must never reach the kernel
}

// TestNetnsOwnAddresses (issue 36): a real `edgelb run` in the demo lab's
// gateway namespace is asked, through its REST API, to turn its own
// addresses (per interface kind: veth, bridge, loopback; IPv4 and IPv6,
// link-local; the API's address:port; memberlist's bind; BGP's router ID
// and session source; subnet broadcast and network addresses) into pool
// addresses, VIPs and backends. Each is refused with 4xx naming the
// reason; then a VIP and a backend that become interface addresses after
// their services exist are reported failed and left out, and programmed
// again when the addresses go. After every attempt the own address is
// looked for in `nft list ruleset` (edgelb's tables): never there.
func TestNetnsOwnAddresses(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	l, err := New(Options{Prefix: netns.Unique("elbown")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	gw := l.Gateway
	for _, a := range []struct{ link, p string }{{l.FrontIf, ownNodeAddr + "/24"}, {"lo", ownLo + "/32"}, {l.FrontIf, ownV6 + "/64"}} {
		if err := gw.AddAddr(a.link, netip.MustParsePrefix(a.p)); err != nil {
			t.Fatal(err)
		}
	}
	ll := linkLocal(t, gw, l.FrontIf)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(DemoToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(ownConfig(l, filepath.Join(dir, "state"), token)), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	w := &syncWriter{w: logs}
	d, err := l.StartDaemon(exe, cfg, w, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.WaitAPI(ctx, ownAPI, d); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	client := gw.HTTPClient(5 * time.Second)
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+ownAPI+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+DemoToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	ruleset := func() string {
		out, err := gw.Exec(context.Background(), "nft", "list", "ruleset")
		if err != nil {
			t.Fatalf("nft list ruleset: %v %s", err, out)
		}
		if !strings.Contains(string(out), "edgelb") {
			t.Fatalf("no edgelb table in the gateway:\n%s", out)
		}
		return string(out)
	}
	if inRuleset(ruleset(), VIP.String()) == false {
		t.Fatalf("web's VIP %s is not programmed: the check below would prove nothing", VIP)
	}

	pool := func(name, addr string) string {
		return fmt.Sprintf(`{"name":%q,"addresses":[%q]}`, name, addr)
	}
	vipSvc := func(vip string, port int) string {
		be := "198.51.100.2"
		if strings.Contains(vip, ":") {
			be = "2001:db8:1::2"
		}
		return fmt.Sprintf(`{"name":"x","vips":[%q],"ports":[{"port":%d}],"backends":[{"address":%q}]}`, vip, port, be)
	}
	beSvc := func(be string) string {
		if strings.Count(be, ":") > 1 {
			return fmt.Sprintf(`{"name":"x","pool":"demo","families":["IPv6"],"ports":[{"port":81}],"backends":[{"address":%q}]}`, be)
		}
		return fmt.Sprintf(`{"name":"x","pool":"demo","ports":[{"port":81}],"backends":[{"address":%q}]}`, be)
	}
	api := netip.MustParseAddrPort(ownAPI)
	attempts := []ownAttempt{
		{"pool holding the front (veth) address", "POST", "/api/v1/pools", pool("p1", "192.0.2.1-192.0.2.5"), "192.0.2.1"},
		{"pool = front broadcast", "POST", "/api/v1/pools", pool("p2", "192.0.2.255/32"), "192.0.2.255"},
		{"pool = front network address", "POST", "/api/v1/pools", pool("p3", "192.0.2.0/32"), "192.0.2.0"},
		{"pool holding the bridge address", "POST", "/api/v1/pools", pool("p4", "198.51.100.1-198.51.100.9"), "198.51.100.1"},
		{"pool = loopback extra address", "POST", "/api/v1/pools", pool("p5", ownLo), ownLo},
		{"pool = BGP router ID", "POST", "/api/v1/pools", pool("p6", ownRouterID+"/32"), ownRouterID},
		{"pool holding the IPv6 front address", "POST", "/api/v1/pools", pool("p7", "2001:db8:f::/120"), ownV6},
		{"pool = memberlist bind address", "POST", "/api/v1/pools", pool("p8", "192.0.2.1/32"), "192.0.2.1"},
		{"VIP = front (API, memberlist) address", "PUT", "/api/v1/services/x", vipSvc("192.0.2.1", 80), "192.0.2.1"},
		{"VIP = API address:port", "PUT", "/api/v1/services/x", vipSvc(api.Addr().String(), int(api.Port())), api.Addr().String()},
		{"VIP = bridge address", "PUT", "/api/v1/services/x", vipSvc("198.51.100.1", 80), "198.51.100.1"},
		{"VIP = loopback extra address", "PUT", "/api/v1/services/x", vipSvc(ownLo, 80), ownLo},
		{"VIP = front broadcast", "PUT", "/api/v1/services/x", vipSvc("192.0.2.255", 80), "192.0.2.255"},
		{"VIP = front network address", "PUT", "/api/v1/services/x", vipSvc("192.0.2.0", 80), "192.0.2.0"},
		{"VIP = BGP router ID", "PUT", "/api/v1/services/x", vipSvc(ownRouterID, 80), ownRouterID},
		{"VIP = IPv6 global front address", "PUT", "/api/v1/services/x", vipSvc(ownV6, 80), ownV6},
		{"VIP = IPv6 link-local front address", "PUT", "/api/v1/services/x", vipSvc(ll, 80), ll},
		{"VIP = loopback 127.0.0.1", "PUT", "/api/v1/services/x", vipSvc("127.0.0.1", 80), "127.0.0.1"},
		{"backend = API address:port", "PUT", "/api/v1/services/x", beSvc(ownAPI), api.Addr().String()},
		{"backend = memberlist bind:port", "PUT", "/api/v1/services/x", beSvc("192.0.2.1:7946"), "192.0.2.1"},
		{"backend = bridge (BGP source) address", "PUT", "/api/v1/services/x", beSvc("198.51.100.1:8080"), "198.51.100.1"},
		{"backend = bridge broadcast", "PUT", "/api/v1/services/x", beSvc("198.51.100.255"), "198.51.100.255"},
		{"backend = loopback extra address", "PUT", "/api/v1/services/x", beSvc(ownLo), ownLo},
		{"backend = BGP router ID", "PUT", "/api/v1/services/x", beSvc(ownRouterID), ownRouterID},
		{"backend = front network address", "PUT", "/api/v1/services/x", beSvc("192.0.2.0"), "192.0.2.0"},
		{"backend = IPv6 global front address", "PUT", "/api/v1/services/x", beSvc("[" + ownV6 + "]:8080"), ownV6},
		{"backend = IPv6 link-local", "PUT", "/api/v1/services/x", beSvc(ll), ll},
		{"backend = 127.0.0.1:8080", "PUT", "/api/v1/services/x", beSvc("127.0.0.1:8080"), "127.0.0.1"},
	}
	type row struct{ attempt, answer, clean string }
	var rows []row
	for _, a := range attempts {
		code, body := do(a.method, a.path, a.body)
		var eb struct{ Error, Field string }
		_ = json.Unmarshal([]byte(body), &eb)
		clean := !inRuleset(ruleset(), a.addr)
		rows = append(rows, row{a.name, fmt.Sprintf("%d %s: %s", code, eb.Field, eb.Error), yesNo(clean)})
		if code/100 != 4 || eb.Field == "" {
			t.Errorf("%s: %d %s, want a 4xx naming the field", a.name, code, body)
		}
		if !clean {
			t.Errorf("%s: %s is in edgelb's nftables table", a.name, a.addr)
		}
	}

	// Later: a VIP and a backend become interface addresses after their
	// services exist (on lo and on the bridge), then go again.
	for _, s := range []struct{ name, body string }{
		{"late", fmt.Sprintf(`{"name":"late","vips":[%q],"ports":[{"port":80,"targetPort":8080}],"backends":[{"address":"198.51.100.2"}]}`, ownLate)},
		{"lateb", fmt.Sprintf(`{"name":"lateb","pool":"demo","ports":[{"port":82}],"backends":[{"address":%q,"port":8080}]}`, ownLateBe)},
	} {
		if code, body := do("PUT", "/api/v1/services/"+s.name, s.body); code/100 != 2 {
			t.Fatalf("service %s: %d %s", s.name, code, body)
		}
	}
	waitRules := func(addr string, want bool) bool {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) { // a hang guard
			if inRuleset(ruleset(), addr) == want {
				return true
			}
		}
		return false
	}
	if !waitRules(ownLate, true) || !waitRules(ownLateBe, true) {
		t.Fatalf("late services not programmed:\n%s", ruleset())
	}
	failed := func(name string) string {
		code, body := do("GET", "/api/v1/services/"+name, "")
		var st struct {
			Failed string `json:"failed"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET %s: %d %s", name, code, body)
		}
		return st.Failed
	}
	waitFailed := func(name string, want bool) string {
		var f string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(apiPoll) { // a hang guard
			if f = failed(name); (f != "") == want {
				break
			}
		}
		return f
	}
	for _, c := range []struct{ name, svc, addr, link string }{
		{"VIP becomes a loopback address", "late", ownLate, "lo"},
		{"backend becomes a bridge address", "lateb", ownLateBe, "back0"},
	} {
		p := netip.MustParsePrefix(c.addr + "/32")
		if err := gw.AddAddr(c.link, p); err != nil {
			t.Fatal(err)
		}
		f := waitFailed(c.svc, true)
		clean := waitRules(c.addr, false)
		webOK := inRuleset(ruleset(), VIP.String())
		rows = append(rows, row{c.name + " (" + c.addr + " added on " + c.link + ")", "service failed: " + f, yesNo(clean)})
		if f == "" || !strings.Contains(f, c.addr+" is this gateway's own address (interface "+c.link+")") || !clean || !webOK {
			t.Errorf("%s: failed %q, kernel clean %v, web still programmed %v", c.name, f, clean, webOK)
		}
		lk, err := gw.Netlink().LinkByName(c.link)
		if err == nil {
			err = gw.Netlink().AddrDel(lk, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}})
		}
		if err != nil {
			t.Fatal(err)
		}
		f = waitFailed(c.svc, false)
		back := waitRules(c.addr, true)
		rows = append(rows, row{c.name + ": address removed again", fmt.Sprintf("failed %q; programmed again %v", f, back), "n/a (programmed)"})
		if f != "" || !back {
			t.Errorf("%s removed: failed %q, programmed again %v", c.name, f, back)
		}
	}
	_, metrics := do("GET", "/metrics", "")
	var met []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "edgelb_own_address_services") {
			met = append(met, line)
		}
	}
	t.Logf("self-harm table (%d attempts):", len(rows))
	t.Logf("| # | attempt | answer | kernel clean |")
	t.Logf("|---|---|---|---|")
	for i, r := range rows {
		t.Logf("| %d | %s | %s | %s |", i+1, r.attempt, strings.ReplaceAll(r.answer, "|", "/"), r.clean)
	}
	t.Logf("MEASURED /metrics after: %v", met)
	if len(rows) < 25 {
		t.Errorf("%d attempts, want at least 25", len(rows))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// inRuleset reports whether addr appears as an address in the edgelb
// tables of an `nft list ruleset` (a whole token: 192.0.2.1 is not in
// 192.0.2.100).
func inRuleset(rs, addr string) bool {
	want := netip.MustParseAddr(addr)
	inTable := false
	for _, line := range strings.Split(rs, "\n") {
		if strings.HasPrefix(line, "table ") {
			inTable = strings.Contains(line, "edgelb")
		}
		if !inTable {
			continue
		}
		for _, tok := range strings.FieldsFunc(line, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '.' || r == ':' || r == '/' || r == '%')
		}) {
			if a, err := netip.ParseAddr(tok); err == nil && a.WithZone("") == want {
				return true
			}
			if ap, err := netip.ParseAddrPort(tok); err == nil && ap.Addr() == want {
				return true
			}
			if p, err := netip.ParsePrefix(tok); err == nil && p.Addr() == want {
				return true
			}
		}
	}
	return false
}

func linkLocal(t *testing.T, n *netns.NS, link string) string {
	t.Helper()
	lk, err := n.Netlink().LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := n.Netlink().AddrList(lk, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			return a.IP.String()
		}
	}
	t.Fatalf("%s has no IPv6 link-local address", link)
	return ""
}
