package config

import (
	"testing"
	"time"
)

func TestBFDParsed(t *testing.T) {
	cfg := mustParse(t, "announce: {bgp: {localASN: 65001, peers: [{address: 192.0.2.1, asn: 65000, bfd: {enabled: true}}, "+
		"{address: 192.0.2.2, asn: 65000, bfd: {enabled: true, receiveInterval: 100ms, transmitInterval: 200ms, multiplier: 5, passive: true}}, "+
		"{address: 192.0.2.3, asn: 65000, bfd: {enabled: false, multiplier: 5}}]}}\n", nil)
	ps := cfg.Announce.BGP.Peers
	if b := ps[0].BFD; b == nil || *b != (BFD{ReceiveInterval: 300 * time.Millisecond, TransmitInterval: 300 * time.Millisecond, Multiplier: 3}) {
		t.Fatalf("defaults: %+v", b)
	}
	if b := ps[1].BFD; b == nil || *b != (BFD{ReceiveInterval: 100 * time.Millisecond, TransmitInterval: 200 * time.Millisecond, Multiplier: 5, Passive: true}) {
		t.Fatalf("set: %+v", b)
	}
	if ps[2].BFD != nil {
		t.Fatalf("enabled: false: %+v", ps[2].BFD)
	}
}
