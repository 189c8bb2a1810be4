package fake

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/maglev"
)

// ErrNoChoice is returned by Choose for a service it cannot choose for:
// unknown, no eligible backend, or a scheduler other than mh.
var ErrNoChoice = errors.New("fake: no choice")

// Choose returns the backend the fake's kernel sends a new flow from client
// to the service key to, for scheduler mh — the rule a logic test can lean
// on without a kernel: a Maglev table (proxy/maglev, as nftables builds it)
// of the service's backends with a weight and not draining, indexed by a
// fixed hash of the flow. Like gateways holding the same backends, two
// fakes holding the same objects choose the same backend for a flow, and
// a backend change moves about the changed backend's share of flows. (The
// flow hash is the fake's own, not the kernel's jhash: the rules are the
// same, the individual choices are not.) It reads the objects, so Tamper
// changes it as it changes the "kernel".
func (d *Dataplane) Choose(key proxy.Key, client netip.AddrPort) (netip.AddrPort, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	attrs, ok := d.kernel["service "+key.String()]
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%w: service %s not programmed", ErrNoChoice, key)
	}
	if !strings.Contains(" "+attrs+" ", " sched="+string(proxy.MaglevHash)+" ") {
		return netip.AddrPort{}, fmt.Errorf("%w: service %s: Choose models scheduler mh only (%s)", ErrNoChoice, key, attrs)
	}
	var bs []maglev.Backend
	prefix := "backend " + key.String() + " "
	for id, a := range d.kernel {
		rest, ok := strings.CutPrefix(id, prefix)
		if !ok || strings.Contains(a, "draining") {
			continue
		}
		ap, err := netip.ParseAddrPort(rest)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("fake: object %q: %w", id, err)
		}
		w, _ := strconv.ParseUint(strings.TrimPrefix(a, "weight="), 10, 32)
		if w > 0 {
			bs = append(bs, maglev.Backend{Addr: ap, Weight: uint32(w)})
		}
	}
	if len(bs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: service %s has no eligible backend", ErrNoChoice, key)
	}
	m := maglev.TableSize(len(bs))
	table, err := maglev.Build(bs, m)
	if err != nil {
		return netip.AddrPort{}, err
	}
	h := fnv.New64a()
	h.Write(client.Addr().AsSlice())
	h.Write(binary.BigEndian.AppendUint16(nil, client.Port()))
	h.Write(key.VIP.AsSlice())
	h.Write(binary.BigEndian.AppendUint16(nil, key.Port))
	return bs[table[h.Sum64()%uint64(m)]].Addr, nil
}
