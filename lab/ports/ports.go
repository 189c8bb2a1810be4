// Package ports picks loopback ports for test daemons that must be told a
// port before they bind it (etcd, kube-apiserver, GoBGP, memberlist, the
// edgelb daemon).
//
// The usual trick — listen on port 0, read the port, close, hand it over —
// races with everything else on the machine: the kernel hands out the same
// range (net.ipv4.ip_local_port_range, 32768–60999 by default) as source
// ports of outgoing connections, and a busy test run opens thousands (etcd
// ↔ kube-apiserver, clients). A port closed by the picker is free for the
// next connect() to take as its source port before the daemon binds it; the
// daemon then exits with "address already in use". (k8slab's etcd once exited
// at start in a full `make test`; its log was lost, so this is the likely
// cause, not a proven one.) So Free picks below the ephemeral range, where
// only explicit binds land, at random, and checks that TCP and UDP both bind
// there now.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest port Free picks: above the well-known and most registered
// services' ports that tests might bind on purpose.
const lowest = 10000

// Free returns a loopback port (127.0.0.1) that TCP and UDP can both bind
// right now and that the kernel does not hand out as a source port.
func Free() (int, error) {
	hi := ephemeralLow()
	if hi <= lowest+1000 {
		return 0, fmt.Errorf("ports: the ephemeral range starts at %d, leaving too few ports below it", hi)
	}
	for range 200 {
		p := lowest + rand.IntN(hi-lowest)
		if bindable(p) {
			return p, nil
		}
	}
	return 0, errors.New("ports: no free port below the ephemeral range after 200 tries")
}

// MustFree is Free for tests.
func MustFree(t interface {
	Helper()
	Fatal(...any)
}) int {
	t.Helper()
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func bindable(p int) bool {
	addr := "127.0.0.1:" + strconv.Itoa(p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// ephemeralLow is the first port of net.ipv4.ip_local_port_range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
