package bgp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb/fielderr"
)

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		return Config{LocalASN: 64512, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1,
			Peers: []Peer{{Address: netip.MustParseAddr("192.0.2.2"), ASN: 64513}}}
	}
	if err := base().validate(); err != nil {
		t.Fatalf("base config: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"asn zero", func(c *Config) { c.LocalASN = 0 }, `localASN "0"`},
		{"as_trans", func(c *Config) { c.Peers[0].ASN = 23456 }, `peers[0].asn "23456"`},
		{"router id v6", func(c *Config) { c.RouterID = netip.MustParseAddr("2001:db8::1") }, `routerID "2001:db8::1"`},
		{"router id missing", func(c *Config) { c.RouterID = netip.Addr{} }, `routerID: want a non-zero IPv4`},
		{"listen port", func(c *Config) { c.ListenPort = 70000 }, `listenPort "70000"`},
		{"peer address", func(c *Config) { c.Peers[0].Address = netip.Addr{} }, `peers[0].address: want a unicast`},
		{"duplicate peer", func(c *Config) { c.Peers = append(c.Peers, Peer{Name: "b", Address: c.Peers[0].Address, ASN: 1}) }, `peers[1].address "192.0.2.2": same address as peers[0]`},
		{"duplicate name", func(c *Config) {
			c.Peers = append(c.Peers, Peer{Name: "192.0.2.2", Address: netip.MustParseAddr("192.0.2.3"), ASN: 1})
		}, `peers[1].name "192.0.2.2"`},
		{"source family", func(c *Config) { c.Peers[0].SourceAddress = netip.MustParseAddr("2001:db8::1") }, `peers[0].sourceAddress "2001:db8::1"`},
		{"hold time", func(c *Config) { c.Peers[0].HoldTime = 2 * time.Second }, `peers[0].holdTime "2s"`},
		{"hold fraction", func(c *Config) { c.Peers[0].HoldTime = 3500 * time.Millisecond }, `peers[0].holdTime "3.5s"`},
		{"keepalive", func(c *Config) { c.Peers[0].HoldTime, c.Peers[0].Keepalive = 9*time.Second, 9*time.Second }, `peers[0].keepalive "9s"`},
		{"passive without listener", func(c *Config) { c.Peers[0].Passive = true }, `peers[0].passive "true": a passive peer needs listenPort`},
		{"multihop ibgp", func(c *Config) { c.Peers[0].ASN, c.Peers[0].MultihopTTL = 64512, 2 }, `peers[0].multihopTTL "2"`},
		{"password length", func(c *Config) { c.Peers[0].Password = strings.Repeat("x", 81) }, `peers[0].password "[redacted]"`},
		{"restart time", func(c *Config) { c.RestartTime = time.Hour + 10*time.Minute }, `restartTime "1h10m0s"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			err := c.validate()
			var fe *fielderr.Error
			if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a FieldError containing %s", err, tc.want)
			}
		})
	}
	c := base()
	c.ListenPort, c.Peers[0].Passive = 1179, true
	if err := c.validate(); err != nil {
		t.Fatalf("passive with listener: %v", err)
	}
	if _, err := New(Config{LocalASN: 0}); err == nil || !strings.Contains(err.Error(), "bgp config") {
		t.Fatalf("New with bad config: %v", err)
	}
}
