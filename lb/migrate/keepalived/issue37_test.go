package keepalived

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func convertText(t *testing.T, src string, opts Options) (*Result, error) {
	t.Helper()
	nodes, err := Parse(src)
	if err != nil {
		return nil, err
	}
	return Convert(nodes, opts)
}

func findings(r *Result) string {
	var b strings.Builder
	for _, f := range append(append([]Finding(nil), r.Unsupported...), r.Notes...) {
		b.WriteString(f.String() + " [" + f.Service + " " + string(f.Scope) + "]\n")
	}
	return b.String()
}

// TestIssue37Inputs: the inputs issue 37 found mishandled, each carried,
// carried with a note, or reported — with the file and line.
func TestIssue37Inputs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(t *testing.T, r *Result)
	}{
		{"fwmark carried as a fwmark service (nat-nosnat, keepalived's NAT), group fwmark entries too",
			"virtual_server fwmark 1 {\n lb_kind NAT\n real_server 10.0.0.1 {\n }\n}\nvirtual_server_group G {\n 192.0.2.1 80\n fwmark 2 inet\n}\nvirtual_server group G {\n lb_kind DR\n real_server 10.0.0.2 80 {\n }\n}\n",
			func(t *testing.T, r *Result) {
				f := findings(r)
				if len(r.Config.Services) != 3 {
					t.Fatalf("services %+v, findings:\n%s", r.Config.Services, f)
				}
				m1, m2 := r.Config.Services[0], r.Config.Services[2]
				if m1.FWMark != 1 || m1.Name != "vs-fwmark-1" || m1.Method != "nat-nosnat" || m1.VIP != "" || len(m1.Ports) != 0 || m1.SharingKey != "" ||
					m2.FWMark != 2 || m2.Method != "dr" || m2.VIP != "" || r.Config.Services[1].VIP != "192.0.2.1" ||
					!strings.Contains(f, "keepalived.conf:1: virtual_server fwmark 1: fwmark with NAT: carried as nat-nosnat") ||
					!strings.Contains(f, "keepalived.conf:8: fwmark 2 inet: the family is the real servers'") {
					t.Errorf("services %+v, findings:\n%s", r.Config.Services, f)
				}
			}},
		{"a fwmark check with no port to probe is reported, not carried", "virtual_server fwmark 1 {\n lb_kind DR\n real_server 10.0.0.1 {\n  TCP_CHECK {\n  }\n }\n}\n",
			func(t *testing.T, r *Result) {
				if r.Config.Services[0].HealthCheck != nil || !strings.Contains(findings(r), "keepalived.conf:3: real_server 10.0.0.1: a fwmark real server without a port") ||
					!strings.Contains(findings(r), "[-f 1 real]") {
					t.Errorf("service %+v, findings:\n%s", r.Config.Services[0], findings(r))
				}
			}},
		{"keepalived's defaults written out", "virtual_server 192.0.2.1 80 {\n real_server 10.0.0.1 80 {\n  TCP_CHECK {\n   connect_timeout 10\n  }\n }\n}\n",
			func(t *testing.T, r *Result) {
				s := r.Config.Services[0]
				h := s.HealthCheck
				if s.Scheduler != "wlc" || s.Method != "nat" || s.Ports[0].Protocol != "UDP" || h.Interval != "60s" || h.Timeout != "10s" || *h.Fall != 2 || *h.Rise != 1 {
					t.Errorf("service %+v health %+v", s, h)
				}
			}},
		{"persistence_timeout without a value is 360 s", "virtual_server 192.0.2.1 80 {\n persistence_timeout\n}\n",
			func(t *testing.T, r *Result) {
				if a := r.Config.Services[0].Affinity; a == nil || a.Timeout != "360s" {
					t.Errorf("affinity %+v", a)
				}
			}},
		{"an unchecked real server is reported, not given its sibling's check", "virtual_server 192.0.2.1 80 {\n real_server 10.0.0.1 80 {\n  TCP_CHECK {\n  }\n }\n real_server 10.0.0.2 80 {\n }\n}\n",
			func(t *testing.T, r *Result) {
				if !strings.Contains(findings(r), "keepalived.conf:6: real_server 10.0.0.2 80: keepalived does not check this real server") {
					t.Errorf("findings:\n%s", findings(r))
				}
			}},
		{"group addresses in no vrrp_instance are reported", "vrrp_instance V {\n interface eth0\n virtual_ipaddress {\n  192.0.2.1\n }\n}\nvirtual_server_group G {\n 192.0.2.1 80\n 192.0.2.9 80\n}\nvirtual_server group G {\n}\n",
			func(t *testing.T, r *Result) {
				f := findings(r)
				if !strings.Contains(f, "keepalived.conf:9: 192.0.2.9 80: 192.0.2.9 is in no vrrp_instance") || strings.Contains(f, "192.0.2.1 is in no") {
					t.Errorf("findings:\n%s", f)
				}
			}},
		{"a /24 VIP gets a note", "vrrp_instance V {\n virtual_ipaddress {\n  192.0.2.1/24\n }\n}\n",
			func(t *testing.T, r *Result) {
				if !strings.Contains(findings(r), "keepalived.conf:3: 192.0.2.1/24: carried as 192.0.2.1/32") {
					t.Errorf("findings:\n%s", findings(r))
				}
			}},
		{"an unknown keyword is skipped when asked", "virtual_server 192.0.2.1 80 {\n lb_algoo rr\n}\n",
			func(t *testing.T, r *Result) {
				if !strings.Contains(findings(r), "keepalived.conf:2: lb_algoo rr: unknown to keepalived") {
					t.Errorf("findings:\n%s", findings(r))
				}
			}},
		{"an IPVS-only scheduler names its service", "virtual_server 192.0.2.1 80 {\n lb_algo lblc\n protocol UDP\n}\n",
			func(t *testing.T, r *Result) {
				if r.Config.Services[0].Scheduler != "wlc" || !strings.Contains(findings(r), "[-u 192.0.2.1:80 service]") {
					t.Errorf("findings:\n%s", findings(r))
				}
			}},
		{"a VIP that is also a real server: that service dropped and reported, the rest converted",
			"virtual_server_group G {\n 192.0.2.1 80\n 192.0.2.1 81\n 192.0.2.2 80\n}\nvirtual_server group G {\n protocol TCP\n real_server 192.0.2.1 80 {\n }\n real_server 10.0.0.2 80 {\n }\n}\n",
			func(t *testing.T, r *Result) {
				f := findings(r)
				if len(r.Config.Services) != 1 || r.Config.Services[0].VIP != "192.0.2.2" ||
					len(r.Config.Pools) != 1 || strings.Join(r.Config.Pools[0].Addresses, ",") != "192.0.2.2/32" ||
					!strings.Contains(f, "keepalived.conf:2: 192.0.2.1 80: VIP 192.0.2.1 is also a real server (keepalived.conf:8)") ||
					!strings.Contains(f, "[-t 192.0.2.1:80 all]") || !strings.Contains(f, "[-t 192.0.2.1:81 all]") {
					t.Errorf("services %+v pools %+v findings:\n%s", r.Config.Services, r.Config.Pools, f)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := convertText(t, tc.in, Options{SkipUnknown: true})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

// TestUnknownRefused: without SkipUnknown an unknown keyword fails the
// conversion, naming the file, the line and the keyword.
func TestUnknownRefused(t *testing.T) {
	for _, in := range []string{"virtual_server 192.0.2.1 80 {\n lb_algoo rr\n}\n", "virtual_servr 192.0.2.1 80 {\n}\n",
		"virtual_server 192.0.2.1 80 {\n real_server 10.0.0.1 80 {\n  HTTP_GET {\n   url {\n    pth /\n   }\n  }\n }\n}\n"} {
		_, err := convertText(t, in, Options{})
		if !errors.Is(err, ErrUnknown) || !strings.HasPrefix(err.Error(), "keepalived.conf:") {
			t.Errorf("%q: err %v, want ErrUnknown naming the line", in, err)
		}
	}
}

// TestIncludeFollowed: include is relative to the including file, a glob,
// read in place; findings name the included file.
func TestIncludeFollowed(t *testing.T) {
	dir := t.TempDir()
	must := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(filepath.Join(dir, "main.conf"), "include conf.d/*.conf\n")
	must(filepath.Join(dir, "conf.d/a.conf"), "virtual_server 192.0.2.1 80 {\n lb_algo rr\n}\n")
	must(filepath.Join(dir, "conf.d/b.conf"), "virtual_server 192.0.2.2 80 {\n sorry_server 10.0.0.9 80\n}\n")
	nodes, err := ParseFile(filepath.Join(dir, "main.conf"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Convert(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := findings(r)
	if len(r.Config.Services) != 2 || !strings.Contains(f, filepath.Join(dir, "conf.d/b.conf")+":2: sorry_server") ||
		!strings.Contains(f, "main.conf:1: include conf.d/*.conf: read ") {
		t.Errorf("services %d, findings:\n%s", len(r.Config.Services), f)
	}
	must(filepath.Join(dir, "loop.conf"), "include loop.conf\n")
	if _, err := ParseFile(filepath.Join(dir, "loop.conf")); !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "includes itself") {
		t.Errorf("self include: %v", err)
	}
}
