//go:build netns

package nft

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsDumpInLargeSteps: a socket primed by primeDumpSize gets a set's
// elements in steps of up to 32 KiB, an unprimed one in steps of one page —
// and every step re-walks the set from the start (dumpsize.go). The
// dataplane primes its socket as it dials it (BenchmarkNetnsResyncFull10000
// shows the effect: a full read-back of 10,000 services × 10 backends).
func TestNetnsDumpInLargeSteps(t *testing.T) {
	ns := netns.NewT(t, "nfd")
	var b strings.Builder
	b.WriteString("table ip t {\n map m { type ipv4_addr . inet_service : ipv4_addr . inet_service; size 100000; }\n}\n")
	const n = 20000
	for c := 0; c < n; c += 2000 {
		var els []string
		for i := c; i < c+2000; i++ {
			els = append(els, fmt.Sprintf("10.0.%d.%d . %d : 192.168.%d.%d . 8080", i>>8, i&255, 1000+i%50, i>>8, i&255))
		}
		fmt.Fprintf(&b, "add element ip t m { %s }\n", strings.Join(els, ", "))
	}
	cmd := ns.Command(context.Background(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	steps := func(prime bool) (recvs, largest int) {
		t.Helper()
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(ns.Handle())})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		if prime {
			var perr error
			if err := rc.Control(func(fd uintptr) { perr = primeDumpSize(int(fd)) }); err != nil || perr != nil {
				t.Fatalf("primeDumpSize: %v %v", err, perr)
			}
		}
		ae := netlink.NewAttributeEncoder()
		ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, "t")
		ae.String(unix.NFTA_SET_ELEM_LIST_SET, "m")
		attrs, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSETELEM), Flags: netlink.Request | netlink.Dump},
			Data:   append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, attrs...),
		}); err != nil {
			t.Fatal(err)
		}
		// Read with a buffer bigger than any step, so each recvmsg returns
		// exactly one step (and records nothing smaller).
		buf := make([]byte, 64<<10)
		for {
			var got int
			var rerr error
			if err := rc.Read(func(fd uintptr) bool {
				got, _, _, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
				return rerr != unix.EAGAIN
			}); err != nil || rerr != nil {
				t.Fatalf("recvmsg: %v %v", err, rerr)
			}
			if !prime && recvs == 0 {
				// The first step was sized before this read; the rest
				// would follow the 64 KiB buffer. Keep the unprimed
				// socket honest: count the first step only.
				return 1, got
			}
			recvs++
			largest = max(largest, got)
			for p := buf[:got]; len(p) >= unix.NLMSG_HDRLEN; {
				l := int(binary.NativeEndian.Uint32(p))
				if binary.NativeEndian.Uint16(p[4:]) == unix.NLMSG_DONE {
					return recvs, largest
				}
				p = p[min((l+3)&^3, len(p)):]
			}
		}
	}
	_, first := steps(false)
	recvs, largest := steps(true)
	t.Logf("MEASURED dump-steps elements=%d unprimed_first_step_bytes=%d primed_steps=%d primed_largest_step_bytes=%d", n, first, recvs, largest)
	if first > 8192 {
		t.Fatalf("an unprimed socket's first step is %d bytes: the kernel no longer sizes steps by one page, primeDumpSize may be moot", first)
	}
	if largest < 16<<10 {
		t.Fatalf("primed socket: largest step %d bytes, want > 16 KiB", largest)
	}
}
