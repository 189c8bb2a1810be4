package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Element-only transactions, encoded here instead of by google/nftables.
//
// A cold sync at 10,000 services × 10 backends writes ~121,000 elements.
// Through the library each element became a SetElement, a list of
// attributes, three or four marshalled byte slices and then copies of them
// in the message and in the batch: ~40 % of a cold sync's CPU and most of
// its garbage (issue 18: start-up). A batch that holds only elements (no
// table, set, chain or rule change) is encoded straight into one buffer per
// message, byte for byte what SetAddElements and SetDeleteElements queue
// (TestElemMsgsAsLibrary), and sent on the library's own socket with the
// acknowledgements read as its Flush reads them. The whole batch is one
// buffer, kept by the Dataplane from batch to batch. Batches with structural
// changes still go through the library whole.

// appendElemMsgs appends one netlink message per run of at most
// maxMsgElems elements of one (family, set), as writeElems queues them, and
// returns how many it appended.
func (d *Dataplane) appendElemMsgs(b []byte, es []elem, del bool) ([]byte, int) {
	n := 0
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].set == es[i].set && es[j].v6 == es[i].v6 && j-i < maxMsgElems {
			j++
		}
		typ := unix.NFT_MSG_NEWSETELEM
		if del {
			typ = unix.NFT_MSG_DELSETELEM
		}
		at := len(b)
		b = appendMsgHeader(b, uint16(unix.NFNL_SUBSYS_NFTABLES<<8|typ), netlink.Request|netlink.Acknowledge|netlink.Create, d.portid.Load())
		b = appendElemPayload(b, d.tableOf(es[i].v6), es[i].set, es[i:j], del)
		b = closeMsg(b, at)
		n++
		i = j
	}
	return b, n
}

// appendMsgHeader appends a netlink message header (its length set by
// closeMsg; sequence 0: nothing matches replies by it here, and the kernel
// does not care).
func appendMsgHeader(b []byte, typ uint16, flags netlink.HeaderFlags, pid uint32) []byte {
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, uint16(flags))
	b = binary.NativeEndian.AppendUint32(b, 0)
	return binary.NativeEndian.AppendUint32(b, pid)
}

func closeMsg(b []byte, at int) []byte {
	binary.NativeEndian.PutUint32(b[at:], uint32(len(b)-at))
	return b
}

// appendBatchMarker appends NFNL_MSG_BATCH_BEGIN or _END for nf_tables.
func appendBatchMarker(b []byte, typ uint16, pid uint32) []byte {
	at := len(b)
	b = appendMsgHeader(b, typ, netlink.Request, pid)
	b = append(b, unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES)
	return closeMsg(b, at)
}

// appendElemPayload appends what SetAddElements (or SetDeleteElements)
// puts in its message for es, all of set in table t.
func appendElemPayload(b []byte, t *nftables.Table, set string, es []elem, del bool) []byte {
	b = append(b, byte(t.Family), unix.NFNETLINK_V0, 0, 0) // nfgenmsg, res_id 0
	b = attrString(b, unix.NFTA_SET_NAME, set)
	b = binary.BigEndian.AppendUint32(attrHeader(b, unix.NFTA_LOOKUP_SET_ID, 4), 0)
	b = attrString(b, unix.NFTA_SET_TABLE, t.Name)
	list := len(b)
	b = attrHeader(b, unix.NFTA_SET_ELEM_LIST_ELEMENTS|unix.NLA_F_NESTED, 0)
	for i := range es {
		e := &es[i]
		item := len(b)
		b = attrHeader(b, uint16(i+1)|unix.NLA_F_NESTED, 0)
		key := len(b)
		b = attrHeader(b, unix.NFTA_SET_ELEM_KEY|unix.NLA_F_NESTED, 0)
		b = attrBytes(b, unix.NFTA_DATA_VALUE, e.key)
		b = closeNest(b, key)
		switch {
		case (e.set == setDispatch || e.set == setPost) && !del:
			// The library's vmap encoding: data { data { value(kind), data(chain) } }.
			outer := len(b)
			b = attrHeader(b, unix.NFTA_SET_ELEM_DATA|unix.NLA_F_NESTED, 0)
			inner := len(b)
			b = attrHeader(b, unix.NFTA_SET_ELEM_DATA|unix.NLA_F_NESTED, 0)
			b = binary.BigEndian.AppendUint32(attrHeader(b, unix.NFTA_DATA_VALUE, 4), uint32(gotoKind))
			b = attrString(b, unix.NFTA_SET_ELEM_DATA, e.chain)
			b = closeNest(b, inner)
			b = closeNest(b, outer)
		case len(e.val) > 0:
			data := len(b)
			b = attrHeader(b, unix.NFTA_SET_ELEM_DATA|unix.NLA_F_NESTED, 0)
			b = attrBytes(b, unix.NFTA_DATA_VALUE, e.val)
			b = closeNest(b, data)
		}
		b = closeNest(b, item)
	}
	return closeNest(b, list)
}

// gotoKind is the verdict code of a goto (NFT_GOTO, negative), as a variable
// so it converts to its 32-bit two's complement.
var gotoKind = expr.VerdictGoto

// attrHeader appends an attribute header for n bytes of data (0 for a
// nested attribute, which closeNest sizes).
func attrHeader(b []byte, typ uint16, n int) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+n))
	return binary.NativeEndian.AppendUint16(b, typ)
}

func attrBytes(b []byte, typ uint16, v []byte) []byte {
	b = append(attrHeader(b, typ, len(v)), v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// attrString is a NUL-terminated string attribute.
func attrString(b []byte, typ uint16, s string) []byte {
	b = append(attrHeader(b, typ, len(s)+1), s...)
	b = append(b, 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// closeNest sets the length of the nested attribute at off to what follows
// it (its members are padded already).
func closeNest(b []byte, off int) []byte {
	binary.NativeEndian.PutUint16(b[off:], uint16(len(b)-off))
	return b
}

// sendElems sends buf (a whole batch: begin marker, msgs element messages,
// end marker) in one sendmsg on the library's socket and reads an
// acknowledgement for each message, as the library's Flush does: a lost
// acknowledgement (ENOBUFS) or a permission error ends the reading, other
// errors are joined. (netlink.Conn.SendMessages would copy every message
// twice more on the way.)
func sendElems(c *netlink.Conn, buf []byte, msgs int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("SendMessages: %w", err)
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), buf, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
		return !errors.Is(serr, unix.EAGAIN) // not sent yet: wait until the socket takes it
	}); err != nil {
		return fmt.Errorf("SendMessages: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("SendMessages: %w", os.NewSyscallError("sendmsg", serr))
	}
	var errs error
	for range msgs {
		if err := receiveAck(c); err != nil {
			if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.ENOBUFS) {
				return err // the kernel sends one error only
			}
			errs = errors.Join(errs, err)
		}
	}
	if errs != nil {
		return fmt.Errorf("conn.Receive: %w", errs)
	}
	return nil
}

// receiveAck reads one message's acknowledgement as the library does: the
// first read holds it (an error message with code 0; netlink returns a
// non-zero code as an error), or else the next one must.
func receiveAck(c *netlink.Conn) error {
	reply, err := c.Receive()
	if err != nil {
		return err
	}
	if n := len(reply); n > 0 && isAck(reply[n-1]) {
		return nil
	}
	ack, err := c.Receive()
	if err != nil {
		return err
	}
	if len(ack) > 0 && !isAck(ack[0]) {
		return fmt.Errorf("expected an acknowledgement, got message type %v", ack[0].Header.Type)
	}
	return nil
}

func isAck(m netlink.Message) bool {
	return m.Header.Type == netlink.Error && len(m.Data) >= 4 && binary.NativeEndian.Uint32(m.Data[:4]) == 0
}
