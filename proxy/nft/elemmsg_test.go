package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// libraryMsgs is what google/nftables sends for es (writeElems' path):
// the request messages between the batch markers, captured by a test dial.
func libraryMsgs(t *testing.T, d *Dataplane, es []elem, del bool) []netlink.Message {
	t.Helper()
	var sent []netlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		sent = append(sent, req...)
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.writeElems(c, es, del); err != nil {
		t.Fatal(err)
	}
	_ = c.Flush() // the fake answers nothing: only what was sent matters
	if len(sent) < 2 {
		t.Fatalf("the library sent %d messages", len(sent))
	}
	return sent // with the batch markers
}

// splitMsgs parses a batch buffer back into its messages.
func splitMsgs(t *testing.T, b []byte) []netlink.Message {
	t.Helper()
	var out []netlink.Message
	for len(b) > 0 {
		var m netlink.Message
		n := int(binary.NativeEndian.Uint32(b))
		if n < 16 || n > len(b) || n%4 != 0 {
			t.Fatalf("a message of %d bytes in %d", n, len(b))
		}
		if err := m.UnmarshalBinary(b[:n]); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		b = b[n:]
	}
	return out
}

// TestElemMsgsAsLibrary: appendElemMsgs encodes, byte for byte, the
// messages the library sends for the same elements, between the same batch
// markers — adds and deletes, both families,
// every set (maps, verdict maps, plain sets), keys and values of every
// length edgelb writes, runs longer than one message.
func TestElemMsgsAsLibrary(t *testing.T) {
	d := newModel()
	d.tables = [2]*nftables.Table{{Name: "edgelb", Family: nftables.TableFamilyIPv4}, {Name: "edgelb", Family: nftables.TableFamilyIPv6}}
	r := rand.New(rand.NewPCG(18, 16))
	sets := []string{setVIP, setNP, setNodes, setDispatch, setBE, setPost, setAff}
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for round := 0; round < 300; round++ {
		n := 1 + r.IntN(2*maxMsgElems+50)
		es := make([]elem, n)
		for i := range es {
			e := elem{v6: r.IntN(2) == 0, set: sets[r.IntN(len(sets))], key: bytesOf([]int{4, 8, 16, 20, 24}[r.IntN(5)])}
			switch e.set {
			case setDispatch, setPost:
				e.chain = fmt.Sprintf("pick-%d", r.IntN(1000))
			case setNodes, setAff:
			default:
				e.val = bytesOf([]int{4, 8, 20}[r.IntN(3)])
			}
			if r.IntN(10) == 0 {
				e.val = nil // a delete's element carries its key only
			}
			es[i] = e
		}
		del := r.IntN(3) == 0
		es = sortedElems(es, !del)
		want := libraryMsgs(t, d, es, del)
		buf := appendBatchMarker(nil, unix.NFNL_MSG_BATCH_BEGIN, 0)
		buf, k := d.appendElemMsgs(buf, es, del)
		buf = appendBatchMarker(buf, unix.NFNL_MSG_BATCH_END, 0)
		got := splitMsgs(t, buf)
		if k != len(got)-2 {
			t.Fatalf("round %d: %d messages counted, %d in the buffer", round, k, len(got)-2)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d messages, the library sends %d", round, len(got), len(want))
		}
		for i := range got {
			if got[i].Header.Type != want[i].Header.Type || got[i].Header.Flags != want[i].Header.Flags {
				t.Fatalf("round %d message %d: header %+v, the library's %+v", round, i, got[i].Header, want[i].Header)
			}
			if !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("round %d message %d (del=%v): %d bytes differ from the library's %d:\n%x\n%x", round, i, del, len(got[i].Data), len(want[i].Data), got[i].Data, want[i].Data)
			}
		}
	}
}
