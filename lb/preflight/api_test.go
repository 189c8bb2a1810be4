package preflight

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/edgelb/edgelb/lb/config"
)

func TestAPIFindings(t *testing.T) {
	codes := func(a config.API) []string {
		var out []string
		for _, f := range APIFindings(&config.Config{API: a}) {
			out = append(out, f.Code)
		}
		return out
	}
	lo, any := netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("0.0.0.0:8080")
	tok := []config.APIToken{{Name: "ops", Secret: "x", Role: config.RoleWrite}}
	for _, c := range []struct {
		name string
		api  config.API
		want []string
	}{
		{"loopback, plain, no token", config.API{Listen: lo}, nil},
		{"beyond, plain, tokens", config.API{Listen: any, Tokens: tok}, []string{CodeAPIPlainHTTP}},
		{"beyond, TLS, tokens", config.API{Listen: any, Tokens: tok, TLS: &config.TLS{}}, nil},
		{"beyond, TLS, legacy token", config.API{Listen: any, Token: "x", TLS: &config.TLS{}}, nil},
		{"beyond, TLS, anonymous reads", config.API{Listen: any, Tokens: tok, TLS: &config.TLS{}, AnonymousReads: true}, []string{CodeAPIAnonymousReads}},
		{"beyond, plain, no token", config.API{Listen: any}, []string{CodeAPIPlainHTTP, CodeAPINoToken}},
	} {
		if got := codes(c.api); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
