package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"testing"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

func TestSubscribeLatestWins(t *testing.T) {
	e := start(t, store.NewMem(), Options{})
	ch := e.Subscribe()
	if d := <-ch; len(d.VIPs) != 0 {
		t.Fatalf("initial %+v", d)
	}
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // nobody reads: the writer must not block
		if _, _, err := e.PutService(ctx, svc(fmt.Sprint("s", i), 80)); err != nil {
			t.Fatal(err)
		}
	}
	d := <-ch
	if len(d.VIPs) != 20 || !reflect.DeepEqual(d, e.Desired()) {
		t.Fatalf("latest: %d VIPs", len(d.VIPs))
	}
	select {
	case d := <-ch:
		t.Fatalf("stale value left behind: %d VIPs", len(d.VIPs))
	default:
	}
}

func TestConcurrentCallers(t *testing.T) {
	mem := store.NewMem()
	e := start(t, mem, Options{})
	if _, err := e.CreatePool(ctx, mustPool(t, "p", true, "192.0.2.0/27")); err != nil {
		t.Fatal(err)
	}
	ch := e.Subscribe()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // a subscriber reading as fast as it can
		defer readers.Done()
		for {
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				name := fmt.Sprintf("g%d-s%d", g, i%6)
				var err error
				switch i % 4 {
				case 0, 1:
					s := svc(name, uint16(80+i%3))
					if i%3 == 0 {
						s.SharingKey = "shared"
					}
					_, _, err = e.PutService(ctx, s)
				case 2:
					err = e.DeleteService(ctx, name)
					if errors.Is(err, lb.ErrNotFound) {
						err = nil
					}
				case 3:
					_, err = e.Services(ctx)
					if err == nil {
						_, err = e.Pools(ctx)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	// No address held by two services that may not share it, and the
	// store says exactly what the engine says.
	svcs, _ := e.Services(ctx)
	holders := map[netip.Addr][]lb.ServiceStatus{}
	for _, s := range svcs {
		for _, ip := range s.VIPs {
			holders[ip] = append(holders[ip], s)
		}
	}
	for ip, hs := range holders {
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				a, b := hs[i].Spec, hs[j].Spec
				if a.SharingKey == "" || a.SharingKey != b.SharingKey || a.Ports[0] == b.Ports[0] {
					t.Fatalf("%s held by %s and %s", ip, a.Name, b.Name)
				}
			}
		}
	}
	st, _ := mem.Load()
	if len(st.Services) != len(svcs) {
		t.Fatalf("store has %d services, engine %d", len(st.Services), len(svcs))
	}
	for _, s := range svcs {
		if !reflect.DeepEqual(st.Assignments[s.Spec.Name], s.VIPs) && !(len(s.VIPs) == 0 && st.Assignments[s.Spec.Name] == nil) {
			t.Fatalf("%s: store %v, engine %v", s.Spec.Name, st.Assignments[s.Spec.Name], s.VIPs)
		}
	}
	checkRenderCache(t, e)
	t.Logf("%d services, %d addresses in use after 320 concurrent calls", len(svcs), len(holders))
}

// checkRenderCache: the per-service render cache agrees with a render from
// scratch, and the published desired state is that render.
func checkRenderCache(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.do(ctx, func() error {
		cached := e.desired()
		e.rendered, e.order = nil, nil
		fresh := e.desired()
		if !reflect.DeepEqual(cached, fresh) {
			return errors.New("cached desired state differs from a fresh render")
		}
		if !reflect.DeepEqual(fresh, e.Desired()) {
			return errors.New("the published desired state is not a render of the engine's state")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
