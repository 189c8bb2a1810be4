package keepalived

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb/config"
	"github.com/edgelb/edgelb/lb/engine"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// desiredFor runs the converted config through the daemon's engine (on a
// memory store) and returns the dataplane configuration it would program.
func desiredFor(t testing.TB, cfg *config.Config) proxy.Config {
	t.Helper()
	eng, err := engine.NewEngine(store.NewMem(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	done := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := eng.SyncConfig(ctx, cfg.Pools, cfg.Services); err != nil {
		t.Fatalf("the engine refused the converted config: %v", err)
	}
	return eng.Desired().Dataplane
}

// proxyIpvsadmSn renders the dataplane's services as ipvsadm -Sn lists an
// IPVS table: services by protocol, address, port; real servers by
// address and port.
func proxyIpvsadmSn(ss []proxy.Service) string {
	ss = append([]proxy.Service(nil), ss...)
	sort.Slice(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		if a.Protocol != b.Protocol {
			return a.Protocol == proxy.TCP
		}
		if c := a.VIP.Compare(b.VIP); c != 0 {
			return c < 0
		}
		return a.Port < b.Port
	})
	var out strings.Builder
	for _, s := range ss {
		flag := map[proxy.Protocol]string{proxy.TCP: "-t", proxy.UDP: "-u"}[s.Protocol]
		fe := fmt.Sprintf("%s %s:%d", flag, s.VIP, s.Port)
		fmt.Fprintf(&out, "-A %s -s %s", fe, s.Scheduler)
		if s.Affinity > 0 {
			fmt.Fprintf(&out, " -p %d", int(s.Affinity.Seconds()))
		}
		out.WriteString("\n")
		fwd := map[proxy.Method]string{proxy.NAT: "-m", proxy.NATNoSNAT: "-m", proxy.DirectRouting: "-g", proxy.Tunnel: "-i", "": "-m"}[s.Method]
		bs := append([]proxy.Backend(nil), s.Backends...)
		sort.Slice(bs, func(i, j int) bool { return bs[i].Addr.Compare(bs[j].Addr) < 0 })
		for _, b := range bs {
			tun := ""
			if s.Method == proxy.Tunnel {
				tun = " --tun-type ipip" // ipvsadm ≥ 1.30 names the encapsulation
			}
			fmt.Fprintf(&out, "-a %s -r %s %s -w %d%s\n", fe, b.Addr, fwd, b.Weight, tun)
		}
	}
	return out.String()
}

// TestLVSConfDataplane: the proxy.Service set the engine renders for the
// converted conf, written as ipvsadm -Sn, equals the hand-written file
// (the IPVS guest test compares the kernel's own ipvsadm -Sn with it).
func TestLVSConfDataplane(t *testing.T) {
	_, cfg, _ := convertConf(t, "testdata/lvs.conf")
	d := desiredFor(t, cfg)
	want := readFile(t, "testdata/lvs.ipvsadm-Sn")
	if got := proxyIpvsadmSn(d.Services); got != want {
		t.Fatalf("dataplane services as ipvsadm -Sn:\n%s\nwant:\n%s", got, want)
	}
}
