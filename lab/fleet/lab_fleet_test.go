//go:build fleet

package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"

	"github.com/edgelb/edgelb/lab/edgelbbin"
)

const (
	token    = "edgelb-fleet-token"
	poolCIDR = "10.99.0.0/20" // 4,096 addresses: more than the churn ever holds
	apiAddr  = "127.0.0.1:8080"
)

// Addresses on the lab bridge: etcd members .11-.13, gateways .21-.23.
func memberAddr(i int) string  { return fmt.Sprintf("10.77.0.%d", 11+i) }
func gatewayAddr(i int) string { return fmt.Sprintf("10.77.0.%d", 21+i) }

func cacheDir() string {
	if d := os.Getenv("EDGELB_CACHE"); d != "" {
		return d
	}
	return "/var/cache/edgelb"
}

// edgelbBinary is the daemon under test, built once per test binary.
var edgelbBinary = edgelbbin.Path

func TestMain(m *testing.M) { edgelbbin.Main(m) }

// proc is a child process started inside a namespace.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *logbuf.Buffer
}

func startIn(t *testing.T, ns *netns.NS, exe string, args ...string) *proc {
	t.Helper()
	p := &proc{log: &logbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	if err := ns.Do(p.cmd.Start); err != nil {
		t.Fatalf("start %s in %s: %v", exe, ns.Name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends sig and waits (SIGKILL after 20 s).
func (p *proc) stop(sig syscall.Signal) {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// lab is the bridge, the etcd members and the gateways.
type lab struct {
	t        *testing.T
	dir      string
	hub      *netns.NS
	members  []*netns.NS
	etcd     []*proc
	gws      []*netns.NS
	daemons  []*proc
	exe      string
	etcdBin  string
	clusterS string
}

func newLab(t *testing.T) *lab {
	t.Helper()
	netns.RequireRoot(t)
	etcdBin := filepath.Join(cacheDir(), "bin", "etcd")
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("etcd not found at %s: build it with lab/tools/build.sh etcd (make test-fleet does)", etcdBin)
	}
	l := &lab{t: t, dir: t.TempDir(), exe: edgelbBinary(t), etcdBin: etcdBin}
	l.hub = netns.NewT(t, "flh")
	if err := l.hub.Bridge("br0"); err != nil {
		t.Fatal(err)
	}
	attach := func(ns *netns.NS, port, addr string) {
		if err := netns.Veth(ns, "eth0", l.hub, port); err != nil {
			t.Fatal(err)
		}
		if err := l.hub.SetMaster(port, "br0"); err != nil {
			t.Fatal(err)
		}
		if err := ns.AddAddr("eth0", netip.MustParsePrefix(addr+"/24")); err != nil {
			t.Fatal(err)
		}
		if err := ns.LinkUp("lo"); err != nil {
			t.Fatal(err)
		}
	}
	var cluster []string
	for i := range 3 {
		m := netns.NewT(t, fmt.Sprintf("fle%d", i))
		attach(m, fmt.Sprintf("e%d", i), memberAddr(i))
		l.members = append(l.members, m)
		cluster = append(cluster, fmt.Sprintf("m%d=http://%s:2380", i, memberAddr(i)))
	}
	l.clusterS = strings.Join(cluster, ",")
	for i := range 3 {
		g := netns.NewT(t, fmt.Sprintf("flg%d", i))
		attach(g, fmt.Sprintf("g%d", i), gatewayAddr(i))
		l.gws = append(l.gws, g)
	}
	l.etcd = make([]*proc, 3)
	l.daemons = make([]*proc, 3)
	// Cleanups run last-registered first: daemons, then etcd, then the
	// namespaces (registered by NewT above).
	t.Cleanup(func() {
		for i, p := range l.etcd {
			if p != nil {
				p.stop(syscall.SIGTERM)
				if t.Failed() {
					t.Logf("etcd m%d (tail):\n%s", i, p.log.Tail(15))
				}
			}
		}
	})
	t.Cleanup(func() {
		for i, p := range l.daemons {
			if p != nil {
				p.stop(syscall.SIGTERM)
				if t.Failed() {
					t.Logf("gateway %d (tail):\n%s", i, p.log.Tail(40))
				}
			}
		}
	})
	for i := range 3 {
		l.startMember(i)
	}
	l.waitEtcd(30 * time.Second)
	if err := os.WriteFile(filepath.Join(l.dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// startMember starts etcd member i (its data dir survives restarts).
func (l *lab) startMember(i int) {
	a := memberAddr(i)
	state := "new"
	data := filepath.Join(l.dir, fmt.Sprintf("etcd%d", i))
	if _, err := os.Stat(data); err == nil {
		state = "existing"
	}
	l.etcd[i] = startIn(l.t, l.members[i], l.etcdBin,
		"--name", fmt.Sprintf("m%d", i), "--data-dir", data,
		"--listen-peer-urls", "http://"+a+":2380", "--initial-advertise-peer-urls", "http://"+a+":2380",
		"--listen-client-urls", "http://"+a+":2379", "--advertise-client-urls", "http://"+a+":2379",
		"--initial-cluster", l.clusterS, "--initial-cluster-state", state, "--initial-cluster-token", "edgelb-fleet",
		"--max-txn-ops", "10000", "--heartbeat-interval", "100", "--election-timeout", "1000", "--log-level", "warn")
}

func (l *lab) endpoints() string {
	var eps []string
	for i := range 3 {
		eps = append(eps, fmt.Sprintf("%q", "http://"+memberAddr(i)+":2379"))
	}
	return strings.Join(eps, ", ")
}

// startGateway writes gateway i's config and starts its daemon.
func (l *lab) startGateway(i int) {
	dir := filepath.Join(l.dir, fmt.Sprintf("gw%d", i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		l.t.Fatal(err)
	}
	cfg := fmt.Sprintf(`pools:
  - name: fleet
    addresses: [%q]
dataplane:
  mode: nftables
  nodeAddresses: [%q]
api:
  listen: %s
  tokenFile: %s
state:
  type: etcd
  endpoints: [%s]
  prefix: /edgelb
  gateway: gw%d
  dir: %s
`, poolCIDR, gatewayAddr(i), apiAddr, filepath.Join(l.dir, "token"), l.endpoints(), i, dir)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		l.t.Fatal(err)
	}
	l.daemons[i] = startIn(l.t, l.gws[i], l.exe, "run", "--config", path)
}

// waitReady waits for gateway i's /readyz.
func (l *lab) waitReady(i int, limit time.Duration) {
	l.t.Helper()
	c := l.gws[i].HTTPClient(time.Second)
	deadline := time.Now().Add(limit)
	for {
		resp, err := c.Get("http://" + apiAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if !l.daemons[i].running() || time.Now().After(deadline) {
			l.t.Fatalf("gateway %d not ready (%v):\n%s", i, err, l.daemons[i].log.Tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// client talks to one gateway's API from its own loopback address (the
// API limits each peer address to 20 requests/s: each client has its own
// address and paces itself below that).
type client struct {
	http *http.Client
	gw   int
}

func (l *lab) client(gw, id int) *client {
	ns := l.gws[gw]
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 1+byte(id/200), 1+byte(id%200))}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{LocalAddr: local}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &client{gw: gw, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 1}}}
}

// do sends one request; code 0 means no answer (err says why).
func (c *client) do(method, path, body string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(method, "http://"+apiAddr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

type status struct {
	Spec struct {
		Name string `json:"name"`
	} `json:"spec"`
	Assigned []netip.Addr `json:"assigned"`
	Pending  string       `json:"pending"`
}

func serviceBody(name string) string {
	return fmt.Sprintf(`{"name":%q,"pool":"fleet","ports":[{"port":80}],"backends":[{"address":"10.77.0.200","port":8080,"weight":1}]}`, name)
}

// put creates a service; it returns the VIP the answer acknowledged.
func (c *client) put(name string) (int, netip.Addr, error) {
	code, b, _, err := c.do(http.MethodPut, "/api/v1/services/"+name, serviceBody(name))
	if err != nil || code/100 != 2 {
		return code, netip.Addr{}, fmt.Errorf("PUT %s: %d %s %v", name, code, b, err)
	}
	var s status
	if err := json.Unmarshal(b, &s); err != nil || len(s.Assigned) != 1 {
		return code, netip.Addr{}, fmt.Errorf("PUT %s: answer %s (%v)", name, b, err)
	}
	return code, s.Assigned[0], nil
}

// list returns name → addresses as the gateway shows them, and its store
// revision header.
func (c *client) list() (map[string][]netip.Addr, string, error) {
	code, b, h, err := c.do(http.MethodGet, "/api/v1/services", "")
	if err != nil || code != http.StatusOK {
		return nil, "", fmt.Errorf("GET services: %d %s %v", code, b, err)
	}
	var ss []status
	if err := json.Unmarshal(b, &ss); err != nil {
		return nil, "", err
	}
	out := map[string][]netip.Addr{}
	for _, s := range ss {
		out[s.Spec.Name] = s.Assigned
	}
	return out, h.Get("X-Edgelb-Store-Revision"), nil
}

// kernelVIPs reads the IPv4 addresses in edgelb's nftables vip map in ns
// over netlink (no process per read: the propagation poll runs every ms).
func kernelVIPs(ns *netns.NS) (map[netip.Addr]bool, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	set, err := c.GetSetByName(&nftables.Table{Name: "edgelb", Family: nftables.TableFamilyIPv4}, "vip")
	if err != nil {
		return nil, err
	}
	els, err := c.GetSetElements(set)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, e := range els {
		if len(e.Key) >= 4 {
			out[netip.AddrFrom4([4]byte(e.Key[:4]))] = true
		}
	}
	return out, nil
}

// etcdGet sends GET path to member i's client port (from its namespace).
func (l *lab) etcdGet(i int, path string) (int, string, error) {
	resp, err := l.members[i].HTTPClient(2 * time.Second).Get("http://" + memberAddr(i) + ":2379" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitEtcd waits until every running member says it is healthy (quorum).
func (l *lab) waitEtcd(limit time.Duration) {
	l.t.Helper()
	deadline := time.Now().Add(limit)
	for i := range 3 {
		for {
			code, body, err := l.etcdGet(i, "/health")
			if err == nil && code == http.StatusOK && strings.Contains(body, `"health":"true"`) {
				break
			}
			if time.Now().After(deadline) {
				l.t.Fatalf("etcd m%d not healthy: %d %s %v\n%s", i, code, body, err, l.etcd[i].log.Tail(20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// leader is the index of the member that says it leads (-1: none).
func (l *lab) leader() int {
	for i := range 3 {
		if !l.etcd[i].running() {
			continue
		}
		if _, body, err := l.etcdGet(i, "/metrics"); err == nil && strings.Contains(body, "\netcd_server_is_leader 1") {
			return i
		}
	}
	return -1
}

// fleetView is GET /api/v1/fleet.
type fleetView struct {
	Gateway  string `json:"gateway"`
	Revision int64  `json:"revision"`
	Gateways []struct {
		Name     string `json:"name"`
		Revision int64  `json:"revision"`
	} `json:"gateways"`
}

// waitFleet waits until gateway gw's /api/v1/fleet lists n gateways, all at
// its own revision (polled twice a second).
func (l *lab) waitFleet(gw, n int) fleetView {
	l.t.Helper()
	c := l.client(gw, 7)
	var v fleetView
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) { // a hang bound
		code, b, _, err := c.do(http.MethodGet, "/api/v1/fleet", "")
		if err == nil && code == http.StatusOK && json.Unmarshal(b, &v) == nil && len(v.Gateways) == n {
			same := true
			for _, g := range v.Gateways {
				same = same && g.Revision == v.Revision
			}
			if same {
				return v
			}
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("GET /api/v1/fleet on gateway %d: %d %s %v (want %d gateways at one revision)", gw, code, b, err, n)
		}
	}
}
