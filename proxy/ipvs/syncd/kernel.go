package syncd

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Kernel is the small interface over the kernel's sync daemon commands. The
// real one is *Netlink; Fake obeys the same rules for unit tests.
//
// The kernel's rules (net/netfilter/ipvs/ip_vs_ctl.c, ip_vs_sync.c):
//   - Start of a role that is running already: EEXIST (no second master, no
//     second backup; a master and a backup may run together).
//   - Start with a state other than master or backup: EINVAL.
//   - Start on an interface the namespace does not have: ENODEV.
//   - Start with a group that is not multicast: EINVAL.
//   - Stop of a role that is not running: ESRCH.
//
// Errors wrap the kernel's unix.Errno (errors.Is(err, unix.EEXIST)).
type Kernel interface {
	Start(role Role, p Params) error
	Stop(role Role) error
	List() ([]Daemon, error)
}

// ErrNoIPVS is returned when the generic netlink family "IPVS" is not
// registered (module ip_vs not loaded).
var ErrNoIPVS = errors.New("generic netlink family \"IPVS\" not registered (module ip_vs not loaded)")

// ErrTimeout is returned when the kernel does not answer in time. The
// socket is then closed and the next call opens a fresh one, so edgelb
// never waits forever for an answer the kernel will not send (see Stop).
var ErrTimeout = errors.New("no answer from the kernel")

// DefaultTimeout bounds each request.
const DefaultTimeout = 10 * time.Second

// Netlink is the real Kernel: one generic netlink socket in one network
// namespace. Safe for concurrent use.
type Netlink struct {
	mu      sync.Mutex
	nsPath  string
	c       *netlink.Conn // nil after a timeout: reopened by the next call
	family  uint16
	Timeout time.Duration // per request; DefaultTimeout when zero
}

// Open dials generic netlink inside the namespace at nsPath ("" = the
// caller's) and finds the IPVS family's id. It finds it in a dump of the
// registered families, not by name: the kernel answers a by-name lookup of a
// missing family by loading the module (edgelb never loads modules).
func Open(nsPath string) (*Netlink, error) {
	c, id, err := dial(nsPath)
	if err != nil {
		return nil, err
	}
	return &Netlink{nsPath: nsPath, c: c, family: id}, nil
}

func dial(nsPath string) (*netlink.Conn, uint16, error) {
	cfg := &netlink.Config{}
	if nsPath != "" {
		f, err := os.Open(nsPath)
		if err != nil {
			return nil, 0, fmt.Errorf("ipvs sync daemon: open netns %q: %w", nsPath, err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_GENERIC, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("ipvs sync daemon: dial generic netlink (netns %q): %w", nsPath, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(DefaultTimeout))
	id, err := familyID(c, "IPVS")
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("ipvs sync daemon: %w", err)
	}
	return c, id, nil
}

// Close closes the socket. Running daemons keep running: they are kernel
// threads, stopped only by Stop (or by the namespace going away).
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		return nil
	}
	err := n.c.Close()
	n.c = nil
	return err
}

func (n *Netlink) Start(role Role, p Params) error {
	b, err := encodeStart(role, p)
	if err != nil {
		return err
	}
	if _, err := n.exec(b, netlink.Request|netlink.Acknowledge); err != nil {
		return fmt.Errorf("ipvs sync daemon: start %s on %q sync id %d: %w", role, p.Interface, p.SyncID, err)
	}
	return nil
}

func (n *Netlink) Stop(role Role) error {
	b, err := encodeStop(role)
	if err != nil {
		return err
	}
	_, err = n.execTimeout(b, netlink.Request|netlink.Acknowledge, stopTimeout)
	if errors.Is(err, ErrTimeout) {
		// The kernel stopped the daemon but sent no answer: when the
		// daemon's thread had not run yet, kthread_stop returns -EINTR,
		// stop_sync_thread passes it on, and netlink_rcv_skb sends no ack
		// for -EINTR (seen on 6.1: "stopping backup sync thread N" with no
		// "sync thread started" before it). Ask what runs instead.
		ds, lerr := n.List()
		if lerr == nil && !hasRole(ds, role) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("ipvs sync daemon: stop %s: %w", role, err)
	}
	return nil
}

// stopTimeout bounds a stop: a stop the kernel answers takes milliseconds,
// and one it does not answer (see Stop) is then read back with List.
const stopTimeout = 3 * time.Second

func hasRole(ds []Daemon, r Role) bool {
	for _, d := range ds {
		if d.Role == r {
			return true
		}
	}
	return false
}

func (n *Netlink) List() ([]Daemon, error) {
	msgs, err := n.exec(encodeList(), netlink.Request|netlink.Dump)
	if err != nil {
		return nil, fmt.Errorf("ipvs sync daemon: list: %w", err)
	}
	var out []Daemon
	for _, m := range msgs {
		d, err := parseDaemon(m.Data)
		if err != nil {
			return nil, fmt.Errorf("ipvs sync daemon: list: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (n *Netlink) exec(data []byte, flags netlink.HeaderFlags) ([]netlink.Message, error) {
	return n.execTimeout(data, flags, 0)
}

// execTimeout sends one request and reads its answer within timeout (or
// n.Timeout when shorter or timeout is zero).
func (n *Netlink) execTimeout(data []byte, flags netlink.HeaderFlags, timeout time.Duration) ([]netlink.Message, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		c, id, err := dial(n.nsPath)
		if err != nil {
			return nil, err
		}
		n.c, n.family = c, id
	}
	limit := n.Timeout
	if limit <= 0 {
		limit = DefaultTimeout
	}
	if timeout <= 0 || timeout > limit {
		timeout = limit
	}
	_ = n.c.SetReadDeadline(time.Now().Add(timeout))
	msgs, err := n.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(n.family), Flags: flags},
		Data:   data,
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A late answer would confuse the next request: start afresh.
		n.c.Close()
		n.c = nil
		return nil, fmt.Errorf("%w within %s", ErrTimeout, timeout)
	}
	return msgs, err
}

// Generic netlink controller (include/uapi/linux/genetlink.h).
const (
	genlIDCtrl        = 0x10
	ctrlCmdGetFamily  = 3
	ctrlAttrFamilyID  = 1
	ctrlAttrFamilyNam = 2
)

// familyID finds a generic netlink family's id in a dump of all families.
func familyID(c *netlink.Conn, name string) (uint16, error) {
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: genlIDCtrl, Flags: netlink.Request | netlink.Dump},
		Data:   []byte{ctrlCmdGetFamily, 1, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("list generic netlink families: %w", err)
	}
	for _, m := range msgs {
		id, n, err := parseFamily(m.Data)
		if err != nil {
			return 0, err
		}
		if n == name {
			return id, nil
		}
	}
	return 0, fmt.Errorf("%w: %w", ErrNoIPVS, unix.ENOENT)
}

// parseFamily reads a controller reply's family id and name.
func parseFamily(b []byte) (uint16, string, error) {
	if len(b) < 4 {
		return 0, "", fmt.Errorf("%w: family message of %d bytes", ErrMalformed, len(b))
	}
	ad, err := netlink.NewAttributeDecoder(b[4:])
	if err != nil {
		return 0, "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var id uint16
	var name string
	for ad.Next() {
		switch ad.Type() {
		case ctrlAttrFamilyID:
			id = ad.Uint16()
		case ctrlAttrFamilyNam:
			name = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return 0, "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return id, name, nil
}
