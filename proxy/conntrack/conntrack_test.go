package conntrack

import (
	"net/netip"
	"testing"
	"time"

	ct "github.com/ti-mo/conntrack"

	"github.com/edgelb/edgelb/proxy"
)

func TestConvertDNATFlow(t *testing.T) {
	seen := time.Unix(1700000000, 0)
	f := ct.NewFlow(6, 0, netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("203.0.113.10"), 40000, 80, 60, proxy.CTMark)
	// After DNAT the reply comes from the backend to the client.
	f.TupleReply.IP.SourceAddress = netip.MustParseAddr("198.51.100.2")
	f.TupleReply.Proto.SourcePort = 8080
	f.ID = 77
	f.ProtoInfo.TCP = &ct.ProtoInfoTCP{State: 3}
	f.CountersOrig = ct.Counter{Packets: 5, Bytes: 400}
	f.CountersReply = ct.Counter{Packets: 4, Bytes: 9000, Direction: true}
	got, ok := Convert(&f, seen)
	if !ok {
		t.Fatal("TCP flow not converted")
	}
	want := proxy.Flow{ID: 77, Protocol: proxy.TCP,
		Client:   netip.MustParseAddrPort("192.0.2.2:40000"),
		Frontend: netip.MustParseAddrPort("203.0.113.10:80"),
		Backend:  netip.MustParseAddrPort("198.51.100.2:8080"),
		State:    "ESTABLISHED", Start: seen,
		OrigBytes: 400, OrigPackets: 5, ReplyBytes: 9000, ReplyPackets: 4}
	if got != want {
		t.Fatalf("Convert:\n got %+v\nwant %+v", got, want)
	}
	// The kernel's start timestamp wins over first-seen.
	f.Timestamp.Start = seen.Add(-time.Minute)
	if got, _ := Convert(&f, seen); !got.Start.Equal(seen.Add(-time.Minute)) {
		t.Fatalf("start %v, want kernel timestamp", got.Start)
	}
	f.ProtoInfo.TCP.State = 42
	if got, _ := Convert(&f, seen); got.State != "STATE_42" {
		t.Fatalf("unknown state rendered %q", got.State)
	}
	icmp := ct.NewFlow(1, 0, netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("203.0.113.10"), 0, 0, 30, proxy.CTMark)
	if _, ok := Convert(&icmp, seen); ok {
		t.Fatal("ICMP flow converted; only TCP and UDP are flows of a service")
	}
	udp := ct.NewFlow(17, 0, netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("2001:db8:1::10"), 5353, 53, 30, proxy.CTMark)
	if got, ok := Convert(&udp, seen); !ok || got.State != "" || got.Protocol != proxy.UDP || got.Backend.String() != "[2001:db8:1::10]:53" {
		t.Fatalf("UDP/IPv6 flow: %+v ok=%v", got, ok)
	}
}

func TestDiff(t *testing.T) {
	fl := func(id uint64, bytes uint64) proxy.Flow {
		return proxy.Flow{ID: id, Protocol: proxy.TCP, OrigBytes: bytes,
			Client: netip.MustParseAddrPort("192.0.2.2:1000"), Frontend: netip.MustParseAddrPort("203.0.113.10:80")}
	}
	known := map[uint64]proxy.Flow{}
	evs := Diff(known, []proxy.Flow{fl(1, 10), fl(2, 20)})
	if len(evs) != 2 || evs[0].Type != proxy.FlowNew || evs[1].Type != proxy.FlowNew {
		t.Fatalf("first dump: %+v", evs)
	}
	if evs := Diff(known, []proxy.Flow{fl(1, 10), fl(2, 20)}); len(evs) != 0 {
		t.Fatalf("unchanged dump gave events: %+v", evs)
	}
	evs = Diff(known, []proxy.Flow{fl(2, 25), fl(3, 1)})
	types := map[uint64]proxy.FlowEventType{}
	for _, e := range evs {
		types[e.Flow.ID] = e.Type
	}
	if types[1] != proxy.FlowDestroy || types[2] != proxy.FlowUpdate || types[3] != proxy.FlowNew || len(evs) != 3 {
		t.Fatalf("third dump: %+v", evs)
	}
	if len(known) != 2 || known[2].OrigBytes != 25 {
		t.Fatalf("known after diff: %+v", known)
	}
}

func TestWatcherEvents(t *testing.T) {
	var got []proxy.FlowEvent
	s := &Source{opts: Options{Mark: proxy.CTMark, Mask: proxy.CTMarkMask, Now: time.Now}, seen: map[uint32]time.Time{}}
	w := &watcher{src: s, fn: func(e proxy.FlowEvent) { got = append(got, e) }, known: map[uint64]proxy.Flow{}}
	mk := func(id uint32, mark uint32, state uint8, bytes uint64) *ct.Flow {
		f := ct.NewFlow(6, 0, netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("203.0.113.10"), 40000, 80, 60, mark)
		f.ID = id
		f.ProtoInfo.TCP = &ct.ProtoInfoTCP{State: state}
		f.CountersOrig.Bytes = bytes
		return &f
	}
	w.event(ct.Event{Type: ct.EventNew, Flow: mk(1, 0x1234, 1, 0)}) // not ours
	w.event(ct.Event{Type: ct.EventNew, Flow: mk(2, proxy.CTMark, 1, 0)})
	w.event(ct.Event{Type: ct.EventUpdate, Flow: mk(2, proxy.CTMark, 3, 100)})
	w.event(ct.Event{Type: ct.EventUpdate, Flow: mk(3, proxy.CTMark, 3, 100)}) // missed NEW
	// A destroy without counters and without the mark still ends flow 2,
	// with the last counters known.
	w.event(ct.Event{Type: ct.EventDestroy, Flow: mk(2, 0, 7, 0)})
	w.event(ct.Event{Type: ct.EventDestroy, Flow: mk(1, 0x1234, 7, 0)})
	want := []struct {
		typ   proxy.FlowEventType
		id    uint64
		bytes uint64
	}{{proxy.FlowNew, 2, 0}, {proxy.FlowUpdate, 2, 100}, {proxy.FlowNew, 3, 100}, {proxy.FlowDestroy, 2, 100}}
	if len(got) != len(want) {
		t.Fatalf("events %+v", got)
	}
	for i, w := range want {
		if got[i].Type != w.typ || got[i].Flow.ID != w.id || got[i].Flow.OrigBytes != w.bytes {
			t.Errorf("event %d: %+v, want %+v", i, got[i], w)
		}
	}
	if !got[0].Flow.Start.Equal(got[1].Flow.Start) {
		t.Errorf("first-seen start moved between events: %v vs %v", got[0].Flow.Start, got[1].Flow.Start)
	}
}
