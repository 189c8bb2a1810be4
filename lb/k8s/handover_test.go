package k8s

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// fakeElector plays client-go's elector: Run blocks until its context ends
// (or stop is closed: leadership lost), IsLeader is what the test sets.
type fakeElector struct {
	leading atomic.Bool
	stop    chan struct{}
	ended   chan struct{}
}

func newFakeElector() *fakeElector {
	return &fakeElector{stop: make(chan struct{}), ended: make(chan struct{})}
}

func (f *fakeElector) Run(ctx context.Context) {
	defer close(f.ended)
	select {
	case <-ctx.Done():
	case <-f.stop:
	}
}
func (f *fakeElector) IsLeader() bool { return f.leading.Load() }

func testController() *Controller {
	return &Controller{m: newMetrics(nil)}
}

func TestCampaignRestartsAWaitingElectorOnRelease(t *testing.T) {
	c := testController()
	le := newFakeElector()
	rel := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { c.campaign(context.Background(), le, rel); close(done) }()
	rel <- struct{}{}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("campaign did not return after a release")
	}
	select {
	case <-le.ended:
	default:
		t.Fatal("campaign returned before the elector stopped")
	}
}

func TestCampaignKeepsALeadingElector(t *testing.T) {
	c := testController()
	le := newFakeElector()
	le.leading.Store(true)
	rel := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { c.campaign(context.Background(), le, rel); close(done) }()
	rel <- struct{}{}
	// The release is taken from the channel (the buffer is empty again)
	// and ignored: the campaign still runs.
	for len(rel) != 0 {
		time.Sleep(time.Millisecond)
	}
	rel <- struct{}{} // the first was consumed: this one waits until the next is read
	select {
	case <-done:
		t.Fatal("campaign stopped a leading elector on a release")
	default:
	}
	close(le.stop) // leadership lost
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("campaign did not return when the elector did")
	}
}

func TestCampaignEndsWithContext(t *testing.T) {
	c := testController()
	le := newFakeElector()
	le.leading.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.campaign(ctx, le, make(chan struct{})); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("campaign did not return when its context ended")
	}
}

func TestReleased(t *testing.T) {
	id, empty := "gw-a", ""
	for _, c := range []struct {
		l    *coordinationv1.Lease
		want bool
	}{
		{nil, false},
		{&coordinationv1.Lease{}, true},
		{&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &empty}}, true},
		{&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &id}}, false},
	} {
		if got := released(c.l); got != c.want {
			t.Errorf("released(%+v) = %v, want %v", c.l, got, c.want)
		}
	}
}
