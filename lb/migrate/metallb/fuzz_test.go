package metallb

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
)

// FuzzConvert: `edgelb migrate metallb` reads YAML a user hands it. For any
// input: reading, converting and rendering never panic, and a conversion
// that succeeds renders a config edgelb's own parser accepts — the
// converter refuses what edgelb cannot load instead of writing it out
// (password files, written after the conversion, read as placeholders).
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: a}\nspec: {addresses: [\"192.0.2.0/31\", \"2001:db8::-2001:db8::1\"]}\n"))
	f.Add([]byte("---\n---\nkind: BGPPeer\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _, err := ReadDocuments(bytes.NewReader(data), "fuzz.yaml", true)
		if err != nil {
			return
		}
		res, err := Convert(objs, Options{L2Interface: "eth0", SecretDir: "/nonexistent"})
		if err != nil {
			return
		}
		var w bytes.Buffer
		res.WriteReport(&w)
		_, _ = res.Objects()
		cc, err := res.ClusterConfig()
		if err != nil {
			t.Fatalf("a converted result does not render for Kubernetes mode: %v", err)
		}
		// Convert checked the standalone form; the cluster form must hold too.
		if errs := config.CheckGenerated(cc); errs != nil {
			t.Fatalf("converted, but edgelb refuses the Kubernetes-mode config: %v\n%s", errs, cc)
		}
		cfg, err := res.Config()
		if err != nil {
			t.Fatalf("a converted result does not render: %v", err)
		}
		if errs := config.CheckGenerated(cfg); errs != nil {
			t.Fatalf("converted, but edgelb refuses the config: %v\n%s", errs, cfg)
		}
	})
}
