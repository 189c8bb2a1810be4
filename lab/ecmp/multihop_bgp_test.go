//go:build bgp

package ecmp

// TestBGPBFDMultihop: an eBGP-multihop peer one router away, with BFD on
// both ends: FRR (bgpd, zebra, bfdd) makes it an RFC 5883 multihop session
// (UDP 4784) because the neighbour is ebgp-multihop; edgelb's bfdd session
// is multihop because multihopTTL is 2 (accepting TTL ≥ 254). The session
// comes up (REST: bfd.state up, multihop), and goes down with the path: the
// middle router stops forwarding (an nft drop rule in its namespace; every
// link stays up): FRR's BFD drops the route and edgelb's resets its BGP
// session, long before the 90 s hold time. Then the path comes back and so does everything.
//
//	gw 10.61.0.2 ── mid 10.61.0.1 | 10.60.0.2 ── r 10.60.0.1 (FRR, AS 64500)

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/netns"
)

var (
	mhRouter = netip.MustParsePrefix("10.60.0.1/24")
	mhMidR   = netip.MustParsePrefix("10.60.0.2/24")
	mhMidG   = netip.MustParsePrefix("10.61.0.1/24")
	mhGW     = netip.MustParsePrefix("10.61.0.2/24")
)

func TestBGPBFDMultihop(t *testing.T) {
	m := newMultihop(t)
	start(t, m.gw, "edgelb", edgelbBinary(t), "run", "--config", m.config(t, 0, 0))

	m.wait("BGP and multihop BFD up", 60*time.Second, func(p announce.PeerState, f frrBFD) bool {
		return p.State == "Established" && p.BFD != nil && p.BFD.State == "up" && p.BFD.Multihop && f.Status == "up" && f.Multihop && m.routed()
	})
	p, _ := m.peer()
	t.Logf("up: edgelb %s %s, bfd %+v; FRR bfd %+v", p.State, p.Detail, *p.BFD, m.frr.bfd())

	// Cut the path in the middle: the middle router drops everything it
	// would forward. Every link stays up, so neither end can tell from its
	// interfaces: only BFD (or, 90 s later, the hold time) notices.
	cutPath := func(cut bool) {
		t.Helper()
		script := "table ip cut { chain dropall { type filter hook forward priority 0; policy drop; }; }\n"
		if !cut {
			script = "delete table ip cut\n"
		}
		cmd := m.mid.Command(t.Context(), "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft in mid: %v %s", err, out)
		}
	}
	cutPath(true)
	cut := time.Now()
	for m.routed() {
		if time.Since(cut) > 60*time.Second {
			t.Fatal("FRR still routes to the VIP 60 s after the path was cut")
		}
		time.Sleep(10 * time.Millisecond)
	}
	routerGone := time.Since(cut)
	m.wait("edgelb sees BFD down and resets BGP", 10*time.Second, func(p announce.PeerState, f frrBFD) bool {
		return p.BFD != nil && p.BFD.State == "down" && p.BFD.Downs >= 1 && p.State != "Established"
	})
	gwDown := time.Since(cut)
	p, _ = m.peer()
	t.Logf("MEASURED bfd-multihop path_cut route_gone_ms=%d gateway_bfd_down_and_bgp_reset_ms=%d (hold time 90 s)", routerGone.Milliseconds(), gwDown.Milliseconds())
	t.Logf("down: edgelb %s %q, bfd %+v; FRR bfd %+v", p.State, p.Detail, *p.BFD, m.frr.bfd())
	if gwDown > 10*time.Second || routerGone > 10*time.Second {
		t.Errorf("multihop BFD did not take the session down: router %s, gateway %s", routerGone, gwDown)
	}

	cutPath(false)
	m.wait("back up with the path", 60*time.Second, func(p announce.PeerState, f frrBFD) bool {
		return p.State == "Established" && p.BFD != nil && p.BFD.State == "up" && f.Status == "up" && m.routed()
	})
}

// multihop is TestBGPBFDMultihop's topology with FRR running in r.
type multihop struct {
	t          *testing.T
	r, mid, gw *netns.NS
	frr        multihopFRR
}

func newMultihop(t *testing.T) *multihop {
	t.Helper()
	netns.RequireRoot(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r, mid, gw := netns.NewT(t, "emr"), netns.NewT(t, "emm"), netns.NewT(t, "emg")
	for _, ns := range []*netns.NS{r, mid, gw} {
		must(ns.LinkUp("lo"))
	}
	must(mid.Sysctl("net.ipv4.ip_forward", "1"))
	must(netns.Veth(r, "m", mid, "r"))
	must(netns.Veth(mid, "g", gw, "eth0"))
	must(r.AddAddr("m", mhRouter))
	must(mid.AddAddr("r", mhMidR))
	must(mid.AddAddr("g", mhMidG))
	must(gw.AddAddr("eth0", mhGW))
	must(r.AddRoute(netip.MustParsePrefix("10.61.0.0/24"), mhMidR.Addr()))
	must(gw.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), mhMidG.Addr()))
	return &multihop{t: t, r: r, mid: mid, gw: gw, frr: startMultihopFRR(t, r)}
}

// config writes the gateway's config (BFD on its one peer) and a state
// directory owned by uid:gid, the user edgelb runs as.
func (m *multihop) config(t *testing.T, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgelb-mh-gw-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	for _, d := range []string{dir, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`pools:
  - name: mh
    addresses: ["10.99.1.10-10.99.1.20"]
services:
  - name: web
    pool: mh
    vip: 10.99.1.10
    ports: [{port: 80}]
    backends: [{address: "10.40.0.1"}]
announce:
  withdrawOnShutdown: true
  bgp:
    localASN: 64512
    routerID: %s
    peers:
      - name: r
        address: %s
        asn: 64500
        multihopTTL: 2
        sourceAddress: %s
        bfd: {enabled: true}
dataplane:
  mode: nftables
  nodeAddresses: ["%s"]
api:
  listen: 127.0.0.1:8080
state:
  dir: %s
`, mhGW.Addr(), mhRouter.Addr(), mhGW.Addr(), mhGW.Addr(), state)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// peer is the gateway's one BGP peer as its REST API reports it.
func (m *multihop) peer() (announce.PeerState, error) {
	resp, err := m.gw.HTTPClient(5 * time.Second).Get("http://127.0.0.1:8080/api/v1/announce")
	if err != nil {
		return announce.PeerState{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sts []announce.Status
	if err := json.Unmarshal(b, &sts); err != nil {
		return announce.PeerState{}, fmt.Errorf("%w: %.300s", err, b)
	}
	for _, s := range sts {
		if s.Kind == "bgp" && len(s.Peers) == 1 {
			return s.Peers[0], nil
		}
	}
	return announce.PeerState{}, fmt.Errorf("no bgp peer in %.300s", b)
}

// wait polls the gateway's peer and FRR's BFD session until ok.
func (m *multihop) wait(what string, within time.Duration, ok func(announce.PeerState, frrBFD) bool) time.Duration {
	m.t.Helper()
	t0 := time.Now()
	var p announce.PeerState
	var f frrBFD
	for time.Since(t0) < within {
		var err error
		if p, err = m.peer(); err == nil {
			f = m.frr.bfd()
			if ok(p, f) {
				return time.Since(t0)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.t.Fatalf("%s: not within %s: edgelb %+v bfd %+v; FRR bfd %+v", what, within, p, p.BFD, f)
	return 0
}

// routed: FRR has the VIP's route.
func (m *multihop) routed() bool {
	out, _ := m.r.Exec(m.t.Context(), "ip", "route", "show", "10.99.1.10/32")
	return len(out) > 0
}

type frrBFD struct {
	Peer     string `json:"peer"`
	Multihop bool   `json:"multihop"`
	Status   string `json:"status"`
}

type multihopFRR struct {
	t   *testing.T
	dir string
}

// bfd is the router's one BFD session (zero when there is none yet).
func (f multihopFRR) bfd() frrBFD {
	out, err := exec.Command("vtysh", "--vty_socket", f.dir, "-d", "bfdd", "-c", "show bfd peers json").Output()
	var ps []frrBFD
	if err != nil || json.Unmarshal(out, &ps) != nil || len(ps) != 1 {
		return frrBFD{}
	}
	return ps[0]
}

func startMultihopFRR(t *testing.T, r *netns.NS) multihopFRR {
	for _, d := range []string{"zebra", "bgpd", "bfdd"} {
		if _, err := os.Stat("/usr/lib/frr/" + d); err != nil {
			t.Skipf("FRR %s not installed (lab/deps.sh bgp)", d)
		}
	}
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("no frr user: %v", err)
	}
	dir, err := os.MkdirTemp("", "edgelb-mh-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chmod(dir, 0o755)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	confs := map[string]string{
		"zebra.conf": "hostname r\n",
		"bfdd.conf":  "hostname r\n",
		"bgpd.conf": fmt.Sprintf(`hostname r
router bgp 64500
 bgp router-id %s
 no bgp ebgp-requires-policy
 neighbor %s remote-as 64512
 neighbor %s ebgp-multihop 2
 neighbor %s timers connect 1
 neighbor %s bfd
`, mhRouter.Addr(), mhGW.Addr(), mhGW.Addr(), mhGW.Addr(), mhGW.Addr()),
	}
	for name, c := range confs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
	}
	zs := filepath.Join(dir, "zserv.api")
	common := func(d string) []string {
		return []string{"/usr/lib/frr/" + d, "-f", filepath.Join(dir, d+".conf"), "-i", filepath.Join(dir, d+".pid"),
			"-z", zs, "--vty_socket", dir, "-A", "127.0.0.1", "-P", "0", "-u", "frr", "-g", "frr", "--log", "stdout"}
	}
	start(t, r, "zebra", common("zebra")...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(zs); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("zebra did not open its zserv socket in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	start(t, r, "bfdd", append(common("bfdd"), "--bfdctl", filepath.Join(dir, "bfdd.sock"))...)
	start(t, r, "bgpd", common("bgpd")...)
	return multihopFRR{t: t, dir: dir}
}
