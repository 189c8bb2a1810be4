package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// TestKeeperBusyNeverBlocksReaders: while the keeper is held inside an
// operation, informer handlers, IsLeader, Desired, Subscribe and the
// Manager's lists return at once (they read the snapshot or post); what
// was posted is applied once the keeper is free, and the workers' state
// changes only through it. After Run returns, do refuses without running.
func TestKeeperBusyNeverBlocksReaders(t *testing.T) {
	c, cs, _, ctx := leadingFake(t, prometheus.NewRegistry(), poolObj("p", 0, "192.0.2.0/28"))
	if _, err := cs.CoreV1().Services("default").Create(ctx, lbService("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a VIP in the Desired", func() bool { return len(c.Desired().VIPs) > 0 })

	hold, held := make(chan struct{}), make(chan struct{})
	go c.do(func(*keeper) { close(held); <-hold })
	<-held
	readers := make(chan struct{}, 1)
	var sub <-chan struct{}
	go func() {
		// Everything here must finish while the keeper is still held.
		_ = c.IsLeader()
		_ = c.Desired()
		ch := c.Subscribe()
		s := make(chan struct{})
		go func() { <-ch; close(s) }()
		sub = s
		if _, err := c.Manager().Services(context.Background()); err != nil {
			t.Error(err)
		}
		c.serviceChanged(lbService("b")) // an informer handler
		readers <- struct{}{}
	}()
	select {
	case <-readers:
	case <-time.After(30 * time.Second): // a blocked reader waits as long as the keeper is held: for ever
		t.Fatal("a reader or an informer handler waited for the busy keeper")
	}
	select {
	case <-sub:
		t.Fatal("Subscribe delivered before the keeper applied it")
	case <-time.After(50 * time.Millisecond): // cannot fail by chance: the keeper is held
	}
	close(hold)
	select {
	case <-sub:
	case <-time.After(30 * time.Second):
		t.Fatal("Subscribe was not applied once the keeper was free")
	}
}

// TestKeeperStopped: once stopped (Run's last step) the keeper runs nothing
// more, and a caller of do does not hang.
func TestKeeperStopped(t *testing.T) {
	c, err := New(fake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Options{NodeName: "gw1", HandleClassless: true, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	c.stopKeeper() // what Run does last
	ran := false
	if c.do(func(*keeper) { ran = true }) || ran {
		t.Fatal("do ran on a stopped keeper")
	}
}
