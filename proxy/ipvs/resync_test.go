package ipvs

import (
	"fmt"
	"testing"

	"github.com/edgelb/edgelb/proxy"
)

// manyServices is n services on vip1, ports 1000.., two backends each.
func manyServices(n int) proxy.Config {
	var cfg proxy.Config
	for i := 0; i < n; i++ {
		cfg.Services = append(cfg.Services, proxy.Service{Name: fmt.Sprintf("ns/s%d", i), VIP: vip1, Port: uint16(1000 + i),
			Protocol: proxy.TCP, Scheduler: proxy.WeightedRoundRobin, Backends: []proxy.Backend{b(be1, 1), b(be2, 1)}})
	}
	return cfg
}

// A resync reads the service table once and the destinations of a rotating
// window of 1/spread of the services: after spread resyncs every service was
// read exactly once, and a real server deleted by hand is back by then.
func TestResyncReadsARotatingWindow(t *testing.T) {
	r := newRig(t)
	r.eng.spread = 4
	r.apply(t, manyServices(20))
	victim := key(vip1, 1017)
	r.h.DelDest(victim, realServer{Addr: be2})
	r.h.resetCalls()
	repairedBy := 0
	for i := 1; i <= 4; i++ {
		r.resync(t)
		if got := r.eng.stats.DestReads; got != 5 {
			t.Fatalf("resync %d read %d services' destinations, want 5 (20 / spread 4)", i, got)
		}
		if repairedBy == 0 && len(r.h.dests[victim]) == 2 {
			repairedBy = i
		}
	}
	if r.h.calls["Services"] != 4 {
		t.Fatalf("service table read %d times in 4 resyncs, want 4", r.h.calls["Services"])
	}
	for i := 0; i < 20; i++ {
		if n := r.h.reads[key(vip1, uint16(1000+i))]; n != 1 {
			t.Fatalf("service %d read %d times in one full rotation, want 1", i, n)
		}
	}
	// Sorted keys 1000..1019: port 1017 is in the 4th window (1015..1019).
	if repairedBy != 4 {
		t.Fatalf("hand-deleted real server repaired by resync %d, want 4", repairedBy)
	}
}

// Services whose wanted state changed or that drain are read at every
// converge, in the window or not; a deleted or changed service is seen in the
// one service dump and repaired at the next resync whatever the window.
func TestResyncAlwaysReadsDrainsAndServiceDrift(t *testing.T) {
	r := newRig(t)
	r.eng.spread = 10
	cfg := manyServices(20)
	r.apply(t, cfg)
	// Service 5 loses a backend: it drains (connections open on it).
	cfg.Services[5].Backends = cfg.Services[5].Backends[:1]
	k5 := key(vip1, 1005)
	r.h.setConns(k5, be2, 3, 0)
	r.apply(t, cfg)
	// Someone deletes service 15 and changes the scheduler of service 16.
	k15, k16 := key(vip1, 1015), key(vip1, 1016)
	r.h.DelService(k15)
	s := r.h.svcs[k16]
	s.Sched = "rr"
	r.h.svcs[k16] = s
	r.h.resetCalls()
	r.resync(t)
	if r.h.reads[k5] != 1 {
		t.Fatalf("draining service read %d times, want 1", r.h.reads[k5])
	}
	if len(r.h.dests[k15]) != 2 || r.h.svcs[k16].Sched != "wrr" {
		t.Fatalf("service drift not repaired at the first resync: %v %+v", r.h.dests[k15], r.h.svcs[k16])
	}
	// The window (ports 1000 and 1001: 2 of 20) and the draining one; the
	// recreated one gets its destinations without reading them.
	if got := r.eng.stats.DestReads; got != 3 {
		t.Fatalf("resync read %d services' destinations, want 3", got)
	}
	r.h.setConns(k5, be2, 0, 0)
	r.resync(t)
	if _, still := r.h.dests[k5][be2]; still {
		t.Fatal("drained backend not deleted once its connections ended")
	}
}

// The nftables table is rebuilt by a resync only when someone else committed
// to nftables since edgelb's last write, and every fullEvery-th resync reads
// every service and rebuilds regardless.
func TestResyncRebuildsNFTOnlyWhenNeeded(t *testing.T) {
	r := newRig(t)
	r.eng.spread, r.eng.fullEvery = 4, 3
	r.apply(t, manyServices(8))
	if r.snat.fulls != 1 {
		t.Fatalf("first apply: %d rebuilds, want 1", r.snat.fulls)
	}
	r.resync(t)
	if r.snat.fulls != 1 || r.eng.stats.NFTRebuilt || r.eng.stats.DestReads != 2 {
		t.Fatalf("quiet resync: %d rebuilds, stats %+v", r.snat.fulls, r.eng.stats)
	}
	r.snat.foreign = true
	r.resync(t)
	if r.snat.fulls != 2 || !r.eng.stats.NFTRebuilt {
		t.Fatalf("resync after a foreign commit: %d rebuilds, want 2", r.snat.fulls)
	}
	r.resync(t) // the third: the safety net
	if !r.eng.stats.Full || r.eng.stats.DestReads != 8 || r.snat.fulls != 3 {
		t.Fatalf("3rd resync: stats %+v, %d rebuilds; want a full pass", r.eng.stats, r.snat.fulls)
	}
}
