//go:build netns

package faults

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/demo"
	"github.com/edgelb/edgelb/proxy/hostcheck"
)

// TestNetnsDaemonSysctls: the daemon (dataplane.setSysctls, on by default)
// has the nftables dataplane set every setting of its list in the gateway's
// namespace, nf_conntrack_tcp_be_liberal among them. What each one does to
// traffic is the conformance suite's (OutOfWindow: a segment outside the TCP
// window keeps its connection with it and resets it without).
func TestNetnsDaemonSysctls(t *testing.T) {
	e := newEnv(t, "fsc", 1)
	for _, s := range hostcheck.NFTablesSysctls {
		if err := e.lab.Gateway.Sysctl(s.Name, "0"); err != nil && !s.Optional {
			t.Fatal(err)
		}
	}
	be := e.lab.Backends[0]
	svc := svcDef{Name: "web", Pool: "demo", VIP: demo.VIP, Port: 80, Backends: []beDef{{netip.AddrPortFrom(be.Addr.Addr(), 80), 1}}}
	e.start(e.config(cfgOpts{Services: []svcDef{svc}}))
	e.waitReady(time.Minute)
	for _, s := range hostcheck.NFTablesSysctls {
		v, err := e.lab.Gateway.ReadSysctl(s.Name)
		if err != nil || strings.TrimSpace(v) != s.Want {
			t.Errorf("the daemon left %s = %q (%v), want %s: %s", s.Name, v, err, s.Want, s.Why)
		}
	}
}
