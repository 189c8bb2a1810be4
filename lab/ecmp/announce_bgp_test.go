//go:build bgp

package ecmp

// TestBGPMigratedAnnouncement: MetalLB's advertisement selection, carried
// by `edgelb migrate metallb` into pools' announce: and run by `edgelb
// run`, announces each pool exactly as MetalLB would. One gateway, FRR on
// the router (an IPv4 and an IPv6 session), a client on the same segment:
//
//	client 10.20.0.3 ── br0 (router r: FRR AS 64500, 10.20.0.1, 2001:db8:20::1) ── gw 10.20.0.2, 2001:db8:20::2 (AS 64512)
//
// Pools (testdata/metallb-selection.yaml): l2only (L2Advertisement),
// bgponly (BGPAdvertisement by label, peer r4), both, and dual (IPv4 /24
// and IPv6 /64, BGP aggregated to 24 and 64). FRR's RIB must hold exactly
// the BGP pools' routes and arping from the client must be answered
// exactly for the L2 pools' VIPs. Then the same with the pre-0.13
// ConfigMap (testdata/metallb-configmap.yaml; no "both" pool there).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
)

// announceCase is one pool's VIP and how MetalLB announces it.
type announceCase struct {
	pool   string
	vip    string // the VIP its service gets (the pool's first address)
	l2     bool   // answers ARP
	route  string // the route FRR must have ("" = none)
	family string // IPv4 or IPv6
}

func TestBGPMigratedAnnouncement(t *testing.T) {
	netns.RequireRoot(t)
	exe := edgelbBinary(t)
	objects := []announceCase{
		{"l2only", "10.20.0.100", true, "", "IPv4"},
		{"bgponly", "10.20.0.120", false, "10.20.0.120/32", "IPv4"},
		{"both", "10.20.0.110", true, "10.20.0.110/32", "IPv4"},
		{"dual", "10.99.2.0", false, "10.99.2.0/24", "IPv4"},
		{"dual", "2001:db8:99::", false, "2001:db8:99::/64", "IPv6"},
	}
	configMap := slices.DeleteFunc(slices.Clone(objects), func(c announceCase) bool { return c.pool == "both" })

	r := netns.NewT(t, "ear")
	gw := netns.NewT(t, "eag")
	cl := netns.NewT(t, "eac")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []*netns.NS{r, gw, cl} {
		must(ns.LinkUp("lo"))
		must(ns.Sysctl("net.ipv6.conf.all.accept_dad", "0"))
		must(ns.Sysctl("net.ipv6.conf.default.accept_dad", "0"))
	}
	must(r.Bridge("br0"))
	must(r.AddAddr("br0", netip.MustParsePrefix("10.20.0.1/24")))
	must(r.AddAddr("br0", netip.MustParsePrefix("2001:db8:20::1/64")))
	for _, n := range []struct {
		ns   *netns.NS
		port string
		v4   string
		v6   string
	}{{gw, "g", "10.20.0.2/24", "2001:db8:20::2/64"}, {cl, "c", "10.20.0.3/24", "2001:db8:20::3/64"}} {
		must(netns.Veth(r, n.port, n.ns, "eth0"))
		must(r.SetMaster(n.port, "br0"))
		must(n.ns.AddAddr("eth0", netip.MustParsePrefix(n.v4)))
		must(n.ns.AddAddr("eth0", netip.MustParsePrefix(n.v6)))
	}
	frr := startFRR(t, r, `hostname r
router bgp 64500
 bgp router-id 10.20.0.1
 no bgp ebgp-requires-policy
 neighbor 10.20.0.2 remote-as 64512
 neighbor 10.20.0.2 timers connect 1
 neighbor 2001:db8:20::2 remote-as 64512
 neighbor 2001:db8:20::2 timers connect 1
 address-family ipv6 unicast
  neighbor 2001:db8:20::2 activate
 exit-address-family
`, false)

	for _, run := range []struct {
		name, file string
		cases      []announceCase
	}{{"objects", "testdata/metallb-selection.yaml", objects}, {"configmap", "testdata/metallb-configmap.yaml", configMap}} {
		t.Run(run.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := exec.Command(exe, "migrate", "metallb", "-f", run.file, "--l2-interface", "eth0", "--report", filepath.Join(dir, "report")).Output()
			if err != nil {
				t.Fatalf("edgelb migrate metallb -f %s: %v", run.file, err)
			}
			report, _ := os.ReadFile(filepath.Join(dir, "report"))
			t.Logf("migrated config:\n%s\nreport:\n%s", out, report)
			cfg := filepath.Join(dir, "config.yaml")
			must(os.WriteFile(cfg, append(out, []byte(gatewaySections(dir, run.cases))...), 0o600))
			d := start(t, gw, "gw-"+run.name, exe, "run", "--config", cfg)
			defer d.stop()

			var want4, want6 []string
			for _, c := range run.cases {
				switch {
				case c.route == "":
				case c.family == "IPv4":
					want4 = append(want4, c.route)
				default:
					want6 = append(want6, c.route)
				}
			}
			slices.Sort(want4)
			slices.Sort(want6)
			// The routes arrive together once both sessions are up; the L2
			// VIPs answer once the daemon owns them. Wait for both states,
			// then read each once for the table.
			seen4 := waitRIB(t, frr, "show ip bgp json", want4)
			seen6 := waitRIB(t, frr, "show bgp ipv6 json", want6)
			for _, c := range run.cases {
				if c.l2 {
					waitARP(t, cl, c.vip)
				}
			}
			t.Logf("%-8s %-14s %-24s %s", "pool", "VIP", "expected", "seen")
			for _, c := range run.cases {
				exp, seen := []string{}, []string{}
				if c.l2 {
					exp = append(exp, "arp")
				}
				if c.route != "" {
					exp = append(exp, "bgp "+c.route)
				}
				if c.family == "IPv4" && arping(cl, c.vip, 2) {
					seen = append(seen, "arp")
				}
				for _, p := range append(seen4, seen6...) {
					if netip.MustParsePrefix(p).Contains(netip.MustParseAddr(c.vip)) {
						seen = append(seen, "bgp "+p)
					}
				}
				t.Logf("%-8s %-14s %-24s %s", c.pool, c.vip, strings.Join(exp, ", "), strings.Join(seen, ", "))
				if strings.Join(exp, ",") != strings.Join(seen, ",") {
					t.Errorf("pool %s (%s): expected %v, seen %v", c.pool, c.vip, exp, seen)
				}
			}
		})
	}
}

// gatewaySections completes a migrated config (pools + announce) for one
// gateway: a service per VIP, the dataplane, the API and the state.
func gatewaySections(dir string, cases []announceCase) string {
	var b strings.Builder
	b.WriteString("services:\n")
	done := map[string]bool{}
	for _, c := range cases {
		if done[c.pool] {
			continue
		}
		done[c.pool] = true
		fams, bes := "[IPv4]", "{address: 10.20.0.3}"
		if c.pool == "dual" {
			fams, bes = "[IPv4, IPv6]", bes+", {address: \"2001:db8:20::3\"}"
		}
		fmt.Fprintf(&b, "  - {name: %s, pool: %s, families: %s, ports: [{port: 80, targetPort: 9000}], backends: [%s]}\n",
			c.pool, c.pool, fams, bes)
	}
	os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600)
	fmt.Fprintf(&b, "dataplane: {mode: nftables}\napi: {listen: 127.0.0.1:8080, tokenFile: %s}\nstate: {dir: %s}\n",
		filepath.Join(dir, "token"), filepath.Join(dir, "state"))
	return b.String()
}

// waitRIB waits until FRR's table (vtysh cmd) holds exactly want, and
// returns it; a hang guard of 60 s.
func waitRIB(t *testing.T, frr, cmd string, want []string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := rib(frr, cmd)
		if slices.Equal(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("FRR %q: %v, want exactly %v", cmd, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rib(frr, cmd string) []string {
	out, err := exec.Command("vtysh", "--vty_socket", frr, "-c", cmd).Output()
	if err != nil {
		return nil
	}
	var v struct {
		Routes map[string]json.RawMessage `json:"routes"`
	}
	if json.Unmarshal(out, &v) != nil {
		return nil
	}
	got := []string{}
	for p := range v.Routes {
		got = append(got, p)
	}
	sort.Strings(got)
	return got
}

// arping reports whether vip answers ARP on the client's segment within
// wait seconds.
func arping(cl *netns.NS, vip string, wait int) bool {
	_, err := cl.Exec(context.Background(), "arping", "-c", "1", "-w", fmt.Sprint(wait), "-I", "eth0", vip)
	return err == nil
}

func waitARP(t *testing.T, cl *netns.NS, vip string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !arping(cl, vip, 1) {
		if time.Now().After(deadline) {
			t.Fatalf("no ARP answer for %s in 30 s", vip)
		}
	}
}
