package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAPITokens(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"w": "write-secret\n", "r": "read-secret", "legacy": "old", "empty": " \n", "r2": "read-secret"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	write := func(y string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
api:
  listen: 0.0.0.0:8080
  tokenFile: legacy
  anonymousReads: true
  tokens:
    - {name: ops, file: w, role: write}
    - {name: grafana, file: r, role: read}
`)
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.API
	if a.Token != "old" || !a.AnonymousReads || len(a.Tokens) != 2 ||
		a.Tokens[0] != (APIToken{Name: "ops", File: filepath.Join(dir, "w"), Secret: "write-secret", Role: RoleWrite}) ||
		a.Tokens[1] != (APIToken{Name: "grafana", File: filepath.Join(dir, "r"), Secret: "read-secret", Role: RoleRead}) {
		t.Errorf("api: %+v", a)
	}
	write(`
api:
  tokenFile: legacy
  tokens:
    - {name: default, file: w, role: write}
    - {name: "", file: r, role: read}
    - {name: "a b", file: r2, role: admin}
    - {name: x, file: empty, role: read}
    - {name: x, role: read}
`)
	_, err = Load(cfgPath)
	assertErrors(t, err, []want{
		{"api.tokens[0].name", `taken by api.tokenFile's token`},
		{"api.tokens[1].name", "required"},
		{"api.tokens[2].name", "want letters"},
		{"api.tokens[2].role", "want read or write"},
		{"api.tokens[2].file", "holds the same token as api.tokens[1]"},
		{"api.tokens[3].file", "file is empty"},
		{"api.tokens[4].name", "used twice (also api.tokens[3])"},
		{"api.tokens[4].file", "required"},
	})
}
