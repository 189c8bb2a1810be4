//go:build bgp

package bgp

// The speaker under test runs in a child process — this test binary run
// again by `ip netns exec` — because a network namespace belongs to a
// thread, and GoBGP opens its sockets from goroutines on whatever thread
// the Go scheduler picks: only a process that lives entirely inside the
// namespace keeps every socket there. The parent drives it over stdin and
// stdout, one JSON object per line; the child's slog output (JSON) comes
// back on stderr.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lab/logbuf"
	"github.com/edgelb/edgelb/lab/netns"
	"github.com/prometheus/client_golang/prometheus"
)

const childEnv = "EDGELB_BGP_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	os.Exit(m.Run())
}

// childConfig is Config without the in-process parts (logger, registry).
type childConfig struct {
	LocalASN    uint32
	RouterID    netip.Addr
	ListenPort  int32
	Peers       []Peer
	RestartTime time.Duration
}

type childCmd struct {
	Op       string         `json:"op"` // set, status, close, exit
	VIPs     []announce.VIP `json:"vips,omitempty"`
	Withdraw bool           `json:"withdraw,omitempty"`
}

type childReply struct {
	Err     string             `json:"err,omitempty"`
	Status  announce.Status    `json:"status"`
	Peers   []PeerStatus       `json:"peers"`
	Metrics map[string]float64 `json:"metrics"`
	// Start and Done bracket the operation inside the child (unix ns).
	Start, Done int64
}

func runChild(cfgJSON string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	reg := prometheus.NewRegistry()
	s, err := New(Config{LocalASN: cc.LocalASN, RouterID: cc.RouterID, ListenPort: cc.ListenPort, Peers: cc.Peers,
		RestartTime: cc.RestartTime, Registerer: reg,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child New:", err)
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c childCmd
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "child command:", err)
			return 2
		}
		rep := childReply{Start: time.Now().UnixNano()}
		switch c.Op {
		case "set":
			err = s.SetVIPs(context.Background(), c.VIPs)
		case "close":
			err = s.Close(c.Withdraw)
		case "exit":
			// Exit without closing anything: the kernel closes the sessions'
			// sockets (no NOTIFICATION), as when edgelb exits after
			// Close(false) or crashes.
			return 0
		}
		rep.Done = time.Now().UnixNano()
		if err != nil {
			rep.Err = err.Error()
		}
		rep.Status, rep.Peers, rep.Metrics = s.Status(), s.Peers(), gather(reg)
		if err := enc.Encode(rep); err != nil {
			return 2
		}
	}
	return 0
}

func gather(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[fmt.Sprintf("%s{%s}", mf.GetName(), strings.Join(labels, ","))] = v
		}
	}
	return out
}

// speakerProc is the parent's handle on one child speaker.
type speakerProc struct {
	t    testing.TB
	ns   *netns.NS
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	logs *logbuf.Buffer
	done chan struct{}
}

// startSpeaker runs a speaker in ns. It is killed (by PID) when the test ends.
func startSpeaker(t testing.TB, ns *netns.NS, cc childConfig) *speakerProc {
	t.Helper()
	b, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &speakerProc{t: t, ns: ns, logs: &logbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = ns.Command(context.Background(), exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	p.cmd.Stderr = p.logs
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 1<<20), 1<<24)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("speaker in %s (pid %d) log:\n%s", ns.Name, p.cmd.Process.Pid, p.logs)
		}
	})
	return p
}

func (p *speakerProc) pid() int { return p.cmd.Process.Pid }

// kill ends the child by PID (ip netns exec replaced itself with it).
func (p *speakerProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.t.Errorf("speaker pid %d did not exit", p.pid())
	}
}

func (p *speakerProc) call(c childCmd) childReply {
	p.t.Helper()
	b, _ := json.Marshal(c)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("speaker %s: %v\nlog:\n%s", c.Op, err, p.logs)
	}
	if !p.out.Scan() {
		p.t.Fatalf("speaker %s: no reply (%v)\nlog:\n%s", c.Op, p.out.Err(), p.logs)
	}
	var rep childReply
	if err := json.Unmarshal(p.out.Bytes(), &rep); err != nil {
		p.t.Fatal(err)
	}
	return rep
}

func (p *speakerProc) set(vips ...announce.VIP) childReply {
	p.t.Helper()
	rep := p.call(childCmd{Op: "set", VIPs: vips})
	if rep.Err != "" {
		p.t.Fatalf("SetVIPs: %s", rep.Err)
	}
	return rep
}

func (p *speakerProc) status() childReply { return p.call(childCmd{Op: "status"}) }

// close calls Close(withdraw) in the child and lets it exit.
func (p *speakerProc) close(withdraw bool) {
	p.t.Helper()
	if rep := p.call(childCmd{Op: "close", Withdraw: withdraw}); rep.Err != "" {
		p.t.Fatalf("Close(%v): %s", withdraw, rep.Err)
	}
	p.exit()
}

// exit makes the child exit at once, sessions open, without NOTIFICATION.
func (p *speakerProc) exit() {
	b, _ := json.Marshal(childCmd{Op: "exit"})
	_, _ = p.in.Write(append(b, '\n'))
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.t.Fatalf("speaker pid %d did not exit", p.pid())
	}
}

// waitFailing polls the child until every peer's status gives why (its
// detail), and its log has said why too, for up to within. Each is written
// after a failed attempt at its own moment; how many attempts a fixed pause
// allows depends on how busy the machine is.
func (p *speakerProc) waitFailing(why string, within time.Duration) childReply {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rep := p.status()
		all := len(rep.Status.Peers) > 0
		for _, ps := range rep.Status.Peers {
			all = all && strings.Contains(ps.Detail, why)
		}
		if all && strings.Contains(p.logs.String(), why) {
			return rep
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q in every peer's status and in the log after %s: %+v\nlog:\n%s", why, within, rep.Status.Peers, p.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLog polls the child's log until it has s, for up to within.
func (p *speakerProc) waitLog(s string, within time.Duration) {
	p.t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(p.logs.String(), s); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("log does not mention %q after %s:\n%s", s, within, p.logs)
		}
	}
}

// waitPeer polls the child until its session with name reaches state.
func (p *speakerProc) waitPeer(name, state string, within time.Duration) childReply {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rep := p.status()
		for _, ps := range rep.Status.Peers {
			if ps.Name == name && ps.State == state {
				return rep
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("peer %s never reached %s: %+v\nlog:\n%s", name, state, rep.Status.Peers, p.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkSockets shows the child's BGP connection lives in its namespace and
// not in the test's: `ss -tnp` in each.
func (p *speakerProc) checkSockets(peer netip.AddrPort) {
	p.t.Helper()
	mark := fmt.Sprintf("pid=%d,", p.pid())
	out, err := p.ns.Exec(context.Background(), "ss", "-tnpH", "state", "established")
	if err != nil {
		p.t.Fatal(err)
	}
	found := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, mark) && strings.Contains(l, peer.String()) {
			found = strings.Join(strings.Fields(l), " ")
		}
	}
	if found == "" {
		p.t.Fatalf("no connection of pid %d to %s in netns %s:\n%s", p.pid(), peer, p.ns.Name, out)
	}
	host, err := exec.Command("ss", "-tnpH").CombinedOutput()
	if err != nil {
		p.t.Fatal(err)
	}
	if strings.Contains(string(host), mark) {
		p.t.Fatalf("pid %d has sockets in the test's own namespace:\n%s", p.pid(), host)
	}
	p.t.Logf("socket in netns %s: %s (none of pid %d in the host namespace)", p.ns.Name, found, p.pid())
}
