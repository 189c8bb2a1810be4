package l2

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/edgelb/edgelb/announce"
)

// VIPs keyed to a source address (view.Key; the announcer keys every VIP to
// the lowest source address) have one owner, the rendezvous winner of the
// key; VIPs without a key still spread.
func TestDecideSourceAddressGroupsItsFamily(t *testing.T) {
	src := netip.MustParseAddr("198.51.100.250")
	names := []string{"gw1", "gw2", "gw3"}
	var vips []netip.Addr
	for i := 1; i <= 60; i++ {
		vips = append(vips, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i)))
	}
	vips = append(vips, src)
	serves := setOf(vips)
	key := map[netip.Addr]netip.Addr{}
	for _, v := range vips {
		if v.Is4() {
			key[v] = src
		}
	}
	want := ownerOf(src, names)
	owners6 := map[string]bool{}
	for _, self := range names {
		v := view{Self: self, Ready: true, VIPs: vips, Key: key}
		for _, p := range names {
			if p != self {
				v.Peers = append(v.Peers, peerView{Name: p, Alive: true, Known: true, Ready: true, VIPs: serves})
			}
		}
		d := decide(v)
		for _, vip := range vips {
			switch {
			case vip.Is4() && d.Owner[vip] != want:
				t.Fatalf("%s: %s owned by %s, want %s (the source address's owner)", self, vip, d.Owner[vip], want)
			case vip.Is6():
				owners6[d.Owner[vip]] = true
			}
		}
		claimsAll4 := self == want
		for _, c := range d.Claim {
			if c.Is4() != claimsAll4 && c.Is4() {
				t.Fatalf("%s claims %s", self, c)
			}
		}
	}
	// 60 IPv6 VIPs over 3 members all landing on one: (1/3)^59 ≈ 1e-28.
	if len(owners6) < 2 {
		t.Fatalf("IPv6 VIPs without a source address did not spread: %v", owners6)
	}
}

// handoverLog records Gaining and Released with what the responders
// answered for at that moment.
type handoverLog struct {
	mu        sync.Mutex
	responder []*FakeResponder
	lines     []string
}

func (h *handoverLog) answering() []netip.Addr {
	var out []netip.Addr
	for _, r := range h.responder {
		out = append(out, r.Owned()...)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func (h *handoverLog) Gaining(ctx context.Context, vips []netip.Addr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, fmt.Sprintf("gaining %v while answering %v", vips, h.answering()))
	return nil
}

func (h *handoverLog) Released(ctx context.Context, vips []netip.Addr, owned int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, fmt.Sprintf("released %v (owning %d) while answering %v", vips, owned, h.answering()))
	return nil
}

// The handover runs before the responders answer for gained VIPs and after
// they stopped answering for released ones; the source address is answered
// for on the source interface's responder, the VIPs on the VIP interface's.
func TestHandoverAroundAnswering(t *testing.T) {
	arpR, ndpR, srcR := NewFakeResponder(), NewFakeResponder(), NewFakeResponder()
	h := &handoverLog{responder: []*FakeResponder{arpR, ndpR, srcR}}
	src, vip := netip.MustParseAddr("198.51.100.250"), netip.MustParseAddr("192.0.2.1")
	a, err := New(Config{Interface: "lo", ARP: arpR, NDP: ndpR, Uplink: NewFakeUplink(true), Logger: quietLog,
		SourceAddresses: []netip.Addr{src}, SourceInterface: "eth1", SourceARP: srcR, SourceNDP: NewFakeResponder(), Handover: h})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(true)
	if err := a.SetVIPs(context.Background(), []announce.VIP{{Addr: vip}}); err != nil {
		t.Fatal(err)
	}
	if got := arpR.Owned(); !slices.Equal(got, []netip.Addr{vip}) {
		t.Errorf("VIP interface answers for %v, want [%s]", got, vip)
	}
	if got := srcR.Owned(); !slices.Equal(got, []netip.Addr{src}) {
		t.Errorf("source interface answers for %v, want [%s]", got, src)
	}
	a.SetHealthy(false)
	h.mu.Lock()
	got := slices.Clone(h.lines)
	h.mu.Unlock()
	want := []string{
		fmt.Sprintf("gaining [%s %s] while answering []", vip, src),
		fmt.Sprintf("released [%s %s] (owning 0) while answering []", vip, src),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("handover:\n%q\nwant\n%q", got, want)
	}
}

func TestConfigRefusesTwoSourcesOfAFamily(t *testing.T) {
	_, err := New(Config{Interface: "lo", ARP: NewFakeResponder(), NDP: NewFakeResponder(), Uplink: NewFakeUplink(true), Logger: quietLog,
		SourceAddresses: []netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")}})
	if err == nil {
		t.Fatal("two IPv4 source addresses accepted")
	}
}
