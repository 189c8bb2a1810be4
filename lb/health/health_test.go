package health

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb"
)

type recorder struct {
	mu sync.Mutex
	ev []Event
	ch chan Event
}

func (r *recorder) on(e Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
	r.ch <- e
}

func waitEvent(t *testing.T, r *recorder, healthy bool) Event {
	t.Helper()
	select {
	case e := <-r.ch:
		if e.Healthy != healthy {
			t.Fatalf("got transition healthy=%v, want %v (err %v)", e.Healthy, healthy, e.Err)
		}
		return e
	case <-time.After(30 * time.Second): // a hang guard; probes run 10 ms apart
		t.Fatalf("no transition to healthy=%v", healthy)
	}
	return Event{}
}

func TestHTTPRiseFall(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/healthz" || r.Host != "svc.example" {
			w.WriteHeader(404)
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	r := &recorder{ch: make(chan Event, 10)}
	c := New(Options{OnChange: r.on})
	defer c.Close()
	hc := lb.HealthCheck{Type: "http", Path: "/healthz", Host: "svc.example", Interval: 10 * time.Millisecond, Timeout: 10 * time.Second, Rise: 2, Fall: 3}
	c.Set([]Target{{Service: "web", Backend: ap, Check: hc}})
	status.Store(503)
	e := waitEvent(t, r, false)
	if e.Err == nil {
		t.Fatal("down event without error")
	}
	status.Store(200)
	waitEvent(t, r, true)
	st := c.Status()
	if len(st) != 1 || !st[0].Healthy || st[0].Failures < 3 {
		t.Fatalf("status %+v", st)
	}
	c.Set(nil)
	if len(c.Status()) != 0 {
		t.Fatal("target not removed")
	}
}

func TestTCPDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	r := &recorder{ch: make(chan Event, 10)}
	c := New(Options{OnChange: r.on, MaxInFlight: 1})
	defer c.Close()
	c.Set([]Target{{Service: "db", Backend: ap, Check: lb.HealthCheck{Type: "tcp", Interval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond, Rise: 1, Fall: 2}}})
	time.Sleep(50 * time.Millisecond)
	ln.Close()
	waitEvent(t, r, false)
}

func TestChangedCheckRestartsProbe(t *testing.T) {
	c := New(Options{})
	defer c.Close()
	ap := netip.MustParseAddrPort("127.0.0.1:9")
	hc := lb.HealthCheck{Type: "tcp", Interval: time.Hour, Timeout: 10 * time.Millisecond, Rise: 1, Fall: 1}
	c.Set([]Target{{Service: "a", Backend: ap, Check: hc}})
	c.mu.Lock()
	p1 := c.probes[key{"a", ap}]
	c.mu.Unlock()
	c.Set([]Target{{Service: "a", Backend: ap, Check: hc}})
	c.mu.Lock()
	same := c.probes[key{"a", ap}] == p1
	c.mu.Unlock()
	if !same {
		t.Fatal("unchanged target restarted")
	}
	hc.Fall = 5
	c.Set([]Target{{Service: "a", Backend: ap, Check: hc}})
	c.mu.Lock()
	same = c.probes[key{"a", ap}] == p1
	c.mu.Unlock()
	if same {
		t.Fatal("changed check kept the old probe")
	}
}
