//go:build ui

package webui

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/webui/uitest"
)

// TestUIFleet: a gateway in a fleet (state.type etcd) shows every gateway
// and the store revision each has applied, marks one that lags, and clears
// the mark once it catches up; a gateway outside a fleet shows no section.
func TestUIFleet(t *testing.T) {
	if err := uitest.Available(); err != nil {
		t.Skip(err)
	}
	var mu sync.Mutex
	now := time.Now()
	gws := []store.GatewayStatus{{Name: "gw1", Revision: 42, Reported: now}, {Name: "gw2", Revision: 42, Reported: now},
		{Name: "gw3", Revision: 40, Reported: now.Add(-3 * time.Second)}}
	m := newFakeManager()
	m.seed(t)
	_, fleet := startServer(t, m, func(o *Options) {
		o.FleetName = "gw1"
		o.StoreRevision = func() int64 { return 42 }
		o.Fleet = func(context.Context) ([]store.GatewayStatus, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]store.GatewayStatus(nil), gws...), nil
		}
	})
	_, single := startServer(t, newFakeManager(), nil)

	b := openPage(t, fleet.URL+"/")
	v, err := b.WaitFleet(`!f.hidden && f.rows.length === 3`, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet section %q: %+v", v.Count, v.Rows)
	if v.Rows[0].Gateway != "gw1 (this gateway)" || v.Rows[0].State != "current" || v.Rows[1].State != "current" ||
		v.Rows[2].Revision != "40" || v.Rows[2].State != "2 revision(s) behind" {
		t.Errorf("fleet rows %+v", v.Rows)
	}
	mu.Lock()
	gws[2].Revision = 42
	mu.Unlock()
	caught := time.Now()
	if _, err := b.WaitFleet(`f.rows.length === 3 && f.rows[2].state === 'current'`, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("gw3 caught up: shown %s later (the page polls every 5 s)", time.Since(caught).Round(time.Millisecond))

	if err := b.Open(single.URL + "/"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the first fleet poll's answer (404) has come
	if v, err := b.Fleet(); err != nil || !v.Hidden {
		t.Errorf("a gateway outside a fleet shows the fleet section: %+v %v", v, err)
	}
}
