package keepalived

import (
	"os"
	"testing"
)

// FuzzParse: any input parses or fails with ErrSyntax, never panics, and a
// parsed tree converts or fails with an error (never a panic).
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
		_, _ = Convert(nodes)
	})
}
