package keepalived

import (
	"os"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
)

// FuzzParse: any input parses or fails with ErrSyntax, never panics; a
// parsed tree converts or fails with an error (never a panic); and a
// conversion that succeeds renders a config edgelb's own parser accepts
// (the converter refuses what edgelb cannot load instead of writing it).
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/lvs.conf"); err == nil {
		f.Add(string(b))
	}
	f.Add("virtual_server group G {\n}\nvirtual_server_group G {\n 192.0.2.1-3 80\n fwmark 1\n}\n")
	f.Add("a { b { c } }\n\"q\" {")
	f.Fuzz(func(t *testing.T, s string) {
		nodes, err := Parse(s)
		if err != nil {
			return
		}
		res, err := Convert(nodes, Options{SkipUnknown: true})
		if err != nil {
			return
		}
		out, err := res.YAML()
		if err != nil {
			t.Fatalf("a converted result does not render: %v", err)
		}
		if errs := config.CheckGenerated(out); errs != nil {
			t.Fatalf("converted, but edgelb refuses the config: %v\n%s", errs, out)
		}
	})
}
