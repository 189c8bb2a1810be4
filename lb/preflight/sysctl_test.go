package preflight

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// TestSysctlFindings: a setting still wrong is a warning only when edgelb
// will not set it itself (dataplane.setSysctls: false).
func TestSysctlFindings(t *testing.T) {
	src := hostcheck.Source{Sys: fstest.MapFS{
		"net/ipv4/ip_forward":                       {Data: []byte("0\n")},
		"net/netfilter/nf_conntrack_tcp_be_liberal": {Data: []byte("1\n")},
	}}
	for _, tc := range []struct {
		yaml string
		want hostcheck.Severity
	}{
		{"dataplane: {mode: nftables}\n", hostcheck.Info},
		{"dataplane: {mode: nftables, setSysctls: false}\n", hostcheck.Warn},
	} {
		cfg, err := config.Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		fs := sysctlFindings(cfg, hostcheck.CheckSysctls(src, "nftables", hostcheck.NFTablesSysctls))
		if len(fs) != 2 || fs[0].Code != hostcheck.CodeSysctlWrong || fs[0].Severity != tc.want || fs[1].Code != hostcheck.CodeSysctlOK {
			t.Fatalf("%s: findings %+v, want ip_forward %s then be_liberal ok", tc.yaml, fs, tc.want)
		}
		if set := strings.Contains(fs[0].Message, "edgelb sets it at start"); set != (tc.want == hostcheck.Info) {
			t.Errorf("%s: %q", tc.yaml, fs[0].Message)
		}
	}
}
