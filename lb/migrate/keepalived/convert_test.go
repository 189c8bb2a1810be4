package keepalived

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy"
)

func convertConf(t *testing.T, path string) (*Result, *config.Config, []byte) {
	t.Helper()
	nodes, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(out)
	if err != nil {
		t.Fatalf("edgelb refused the converted config: %v\n%s", err, out)
	}
	return res, cfg, out
}

// ipvsadmSn renders services as `ipvsadm -Sn` would list the IPVS table
// edgelb's IPVS dataplane programs for them (one virtual server per VIP
// and port; -m/-g/-i for nat/dr/tunnel; -p for ClientIP affinity).
func ipvsadmSn(ss []lb.ServiceSpec) string {
	type vs struct {
		key   string
		lines []string
	}
	var all []vs
	for _, s := range ss {
		for _, v := range s.VIPs {
			for _, p := range s.Ports {
				flag := map[proxy.Protocol]string{proxy.TCP: "-t", proxy.UDP: "-u"}[p.Protocol]
				fe := fmt.Sprintf("%s %s:%d", flag, v, p.Port)
				head := fmt.Sprintf("-A %s -s %s", fe, s.Scheduler)
				if s.Affinity > 0 {
					head += fmt.Sprintf(" -p %d", int(s.Affinity.Seconds()))
				}
				fwd := map[proxy.Method]string{proxy.NAT: "-m", proxy.NATNoSNAT: "-m", proxy.DirectRouting: "-g", proxy.Tunnel: "-i"}[s.Method]
				lines := []string{head}
				for _, b := range s.Backends {
					port := b.Port
					if port == 0 {
						port = p.Port
					}
					tun := ""
					if s.Method == proxy.Tunnel {
						tun = " --tun-type ipip"
					}
					lines = append(lines, fmt.Sprintf("-a %s -r %s:%d %s -w %d%s", fe, b.Addr, port, fwd, b.Weight, tun))
				}
				all = append(all, vs{key: fmt.Sprintf("%s:%05d", v, p.Port), lines: lines})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	var b strings.Builder
	for _, v := range all {
		b.WriteString(strings.Join(v.lines, "\n") + "\n")
	}
	return b.String()
}

// TestLVSConfConverts: a conf with NAT, DR and TUN virtual servers, both
// checkers and a group converts to a config edgelb accepts, whose IPVS
// table equals the one written by hand from keepalived's configuration.
func TestLVSConfConverts(t *testing.T) {
	res, cfg, out := convertConf(t, "testdata/lvs.conf")
	want, err := os.ReadFile("testdata/lvs.ipvsadm-Sn")
	if err != nil {
		t.Fatal(err)
	}
	if got := ipvsadmSn(cfg.Services); got != string(want) {
		t.Fatalf("ipvsadm -Sn of the converted config:\n%s\nwant:\n%s\nconfig:\n%s", got, want, out)
	}
	byName := map[string]lb.ServiceSpec{}
	for _, s := range cfg.Services {
		byName[s.Name] = s
	}
	web := byName["vs-192-0-2-10-80-tcp"]
	if h := web.Health; h == nil || h.Type != "http" || h.Path != "/healthz" || h.Expect != 200 || h.Timeout.Seconds() != 3 ||
		h.Interval.Seconds() != 6 || h.Fall != 4 || h.Rise != 1 {
		t.Errorf("web health = %+v", web.Health)
	}
	dr := byName["vs-192-0-2-20-443-tcp"]
	if h := dr.Health; h == nil || h.Type != "tcp" || h.Port != 443 || h.Interval.Seconds() != 10 || h.Fall != 2 || h.Timeout.Seconds() != 2 {
		t.Errorf("dr health = %+v", dr.Health)
	}
	if cfg.Announce.L2 == nil || cfg.Announce.L2.Interface != "eth0" {
		t.Errorf("announce.l2 = %+v", cfg.Announce.L2)
	}
	var kws []string
	for _, f := range res.Unsupported {
		if f.File != "testdata/lvs.conf" {
			t.Errorf("finding %v names file %q", f, f.File)
		}
		kws = append(kws, fmt.Sprintf("%d %s", f.Line, strings.Fields(f.Keyword)[0]))
	}
	wantKW := []string{"3 global_defs", "8 state", "10 virtual_router_id", "11 priority", "12 advert_int",
		"13 authentication", "91 sorry_server"}
	if strings.Join(kws, ",") != strings.Join(wantKW, ",") {
		t.Errorf("unsupported = %v\nwant %v", kws, wantKW)
	}
}

func TestParseSyntax(t *testing.T) {
	nodes, err := Parse("a 1 2 { b \"x y\" # c\n c{d 1}\n}\n! x\ne\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Name != "a" || len(nodes[0].Children) != 2 || nodes[0].Children[0].Args[0] != "x y" ||
		nodes[0].Children[1].Child("d") == nil || nodes[1].Name != "e" || nodes[1].Line != 5 {
		t.Fatalf("tree = %+v", nodes)
	}
	for _, bad := range []string{"a {", "}", "a { b } }", "x \"open\n", strings.Repeat("a {", 40) + strings.Repeat("}", 40)} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: err %v, want ErrSyntax", bad, err)
		}
	}
}

func TestGroupRange(t *testing.T) {
	for _, tc := range []struct {
		rng  string
		want int
	}{{"192.0.2.1-1", 1}, {"192.0.2.1-3", 3}, {"192.0.2.250-255", 6}} {
		nodes, err := Parse("virtual_server_group G {\n " + tc.rng + " 80\n}\nvirtual_server group G {\n}\n")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Convert(nodes, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Config.Services) != tc.want {
			t.Errorf("%s: %d services, want %d", tc.rng, len(res.Config.Services), tc.want)
		}
	}
}

func TestBadValuesNamed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"virtual_server 192.0.2.1 80 {\n lb_kind FOO\n}\n", `keepalived.conf:2: lb_kind "FOO"`},
		{"virtual_server 192.0.2.300 80 {\n}\n", `address "192.0.2.300"`},
		{"virtual_server group NOPE {\n}\n", `group "NOPE"`},
		{"virtual_server 192.0.2.1 80 {\n real_server 10.0.0.1 80 {\n  weight -1\n }\n}\n", `weight "-1"`},
		// Only edgelb's own validator catches it (check.go; FuzzParse found it).
		{"virtual_server 192.0.2.1 80 {\n}\nvirtual_server 0.0.0.10 80 {\n}\n", `keepalived.conf:3: edgelb refuses the converted services[1].vip "0.0.0.10"`},
	} {
		nodes, err := Parse(tc.in)
		if err == nil {
			_, err = Convert(nodes, Options{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %s", tc.in, err, tc.want)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
