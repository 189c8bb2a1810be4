//go:build netns

package hostcheck

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsNodePortOverlap sets an ephemeral range that overlaps the node
// ports inside a fresh namespace and runs the checks from inside it, against
// the real kernel's /proc: the overlap is an Error whose fix merges the
// node-port range into the namespace's reserved list. It also reads this
// machine's own values and checks how they are reported.
func TestNetnsNodePortOverlap(t *testing.T) {
	netns.RequireRoot(t)
	in := NodePortInput{
		Range: PortRange{30000, 32767},
		NodePorts: []NodePort{
			{Port: 30080, Protocol: proxy.TCP, Service: "web"},
			{Port: 30090, Protocol: proxy.TCP, Service: "api"},
		},
	}

	// The machine's own namespace first: read only.
	host, err := ReadEphemeral(System())
	if err != nil {
		t.Fatal(err)
	}
	hostFindings, err := CheckNodePorts(System(), in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host: %s=%s %s=%q -> %s", sysctlPortRange, host.Range, sysctlReservedPorts, FormatPortList(host.Reserved), hostFindings[0])
	if host.Range == (PortRange{32768, 60999}) && len(host.Reserved) == 0 {
		f := hostFindings[0]
		if f.Code != CodeRangeClear || f.Severity != Info || !strings.Contains(f.Message, "adjacent, no overlap") {
			t.Errorf("host default 30000-32767 vs 32768-60999: got %v, want Info %s (adjacent, no overlap)", f, CodeRangeClear)
		}
		if len(find(hostFindings, CodeRangeOverlap)) != 0 {
			t.Errorf("host default reported as overlap: %v", hostFindings)
		}
	} else {
		t.Logf("host ephemeral range is %s (reserved %q), not the 32768-60999 default: adjacency assertion skipped",
			host.Range, FormatPortList(host.Reserved))
	}

	ns := netns.NewT(t, "edgelb-hc-")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := ns.Exec(ctx, "sysctl", "-w", "net.ipv4.ip_local_port_range=30000 40000"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s: %s", ns.Name, strings.TrimSpace(string(out)))
	}
	if _, err := ns.Exec(ctx, "sysctl", "-w", "net.ipv4.ip_local_reserved_ports=8080,45000"); err != nil {
		t.Fatal(err)
	}

	// A listener on node port 30080 and an outbound connection from node port
	// 30090, both inside the namespace on its loopback.
	ln, err := ns.Listen("tcp4", "0.0.0.0:30080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err := ns.Listen("tcp4", "127.0.0.1:9000")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var conn net.Conn
	if err := ns.Do(func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30090}, Timeout: 5 * time.Second}
		var err error
		conn, err = d.DialContext(ctx, "tcp4", "127.0.0.1:9000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	var fs []Finding
	if err := ns.Do(func() error {
		var err error
		fs, err = CheckNodePorts(System(), in)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Logf("%s: %s", ns.Name, f)
	}
	errs := find(fs, CodeRangeOverlap)
	if len(errs) != 1 || errs[0].Severity != Error {
		t.Fatalf("want one %s error inside the namespace, got %v", CodeRangeOverlap, fs)
	}
	if !strings.Contains(errs[0].Message, `"30000-40000"`) || !strings.Contains(errs[0].Message, `at "30000-32767"`) {
		t.Errorf("error does not quote the namespace's ranges: %s", errs[0].Message)
	}
	wantFix := "sysctl -w net.ipv4.ip_local_reserved_ports=8080,30000-32767,45000"
	if !strings.HasPrefix(errs[0].Fix, wantFix+"\n") || !strings.Contains(errs[0].Fix, "net.ipv4.ip_local_reserved_ports = 8080,30000-32767,45000") {
		t.Errorf("fix does not merge into the reserved list:\n%s\nwant first line %s", errs[0].Fix, wantFix)
	}
	if n := len(find(fs, CodeNodePortEphemeral)); n != 2 {
		t.Errorf("%d node-port-in-ephemeral warnings, want 2", n)
	}
	// (4) and (5) on the real kernel: a wildcard listener counts for every node
	// address; the outbound check looks at the local port only.
	if w := find(fs, CodeListenerNodePort); len(w) != 1 || !strings.Contains(w[0].Message, "0.0.0.0:30080") {
		t.Errorf("listener on node port 30080 not reported: %v", fs)
	}
	if w := find(fs, CodeOutboundNodePort); len(w) != 1 || !strings.Contains(w[0].Message, "127.0.0.1:30090->127.0.0.1:9000") {
		t.Errorf("outbound connection from node port 30090 not reported: %v", fs)
	}

	// The fix, applied inside the namespace, clears the error.
	if _, err := ns.Exec(ctx, "sysctl", "-w", "net.ipv4.ip_local_reserved_ports=8080,30000-32767,45000"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error {
		var err error
		fs, err = CheckNodePorts(System(), in)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(find(fs, CodeRangeOverlap)) != 0 || len(find(fs, CodeRangeReserved)) != 1 {
		t.Errorf("after the fix: %v", fs)
	}
}
