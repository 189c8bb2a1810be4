//go:build netns

package nft

import (
	"context"
	"testing"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
)

// TestNetnsResyncGate: resyncs of an unchanged kernel read nothing back
// (the generation gate); commits by others to other tables do not make
// them read either (the change monitor); a hand edit of edgelb's own table
// is read back and repaired by the next resync; every FullEvery-th resync
// reads back regardless.
func TestNetnsResyncGate(t *testing.T) {
	ns := netns.NewT(t, "nfg")
	d, err := New(Options{NetNS: int(ns.Handle()), FullEvery: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Cleanup(context.Background()); d.Close() })
	// The monitor starts after the first sync, so the kernel builds no
	// notification for each element that sync writes (startMonitor).
	if d.mon != nil {
		t.Fatal("a change monitor before the first sync")
	}
	ctx := context.Background()
	cfg := genConfig(200, 4)
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if d.mon == nil {
		t.Fatal("no change monitor after the first sync")
	}
	good := dump(t, ns)
	const (
		none    = "nothing"
		partial = "the touched sets"
		full    = "everything"
	)
	step := func(what string, want string) {
		t.Helper()
		st0 := d.Stats()
		if err := d.Resync(ctx); err != nil {
			t.Fatalf("%s: resync: %v", what, err)
		}
		st1 := d.Stats()
		read := none
		switch {
		case st1.Reads > st0.Reads:
			read = full
		case st1.PartialReads > st0.PartialReads:
			read = partial
		}
		t.Logf("%s: resync read back %s (gated %d, of them past foreign commits %d)", what, read, st1.Gated-st0.Gated, st1.GatedForeign-st0.GatedForeign)
		if read != want {
			t.Errorf("%s: resync read back %s, want %s", what, read, want)
		}
		if g, a := diffLines(good, dump(t, ns)); len(g)+len(a) > 0 {
			t.Errorf("%s: kernel differs from the model after the resync: -%q +%q", what, g, a)
		}
	}
	for i := 0; i < 3; i++ {
		step("idle", none)
	}

	// Someone else's table, chain and rule: three kinds of foreign commit.
	c := rawConn(t, ns)
	other := c.AddTable(&gnft.Table{Family: gnft.TableFamilyINet, Name: "other"})
	ch := c.AddChain(&gnft.Chain{Table: other, Name: "input", Type: gnft.ChainTypeFilter, Hooknum: gnft.ChainHookInput, Priority: gnft.ChainPriorityFilter})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	good = dump(t, ns) // theirs is part of what must stay
	step("another table created", none)
	c.AddRule(&gnft.Rule{Table: other, Chain: ch, Exprs: []expr.Any{&expr.Counter{}}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	// A table of the same name in a family edgelb does not use is not ours.
	c.AddTable(&gnft.Table{Family: gnft.TableFamilyINet, Name: DefaultTable})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	good = dump(t, ns)
	step("a rule and an inet table named like ours", none)

	// A hand edit of edgelb's own table: read back and repaired.
	id := d.svcs[cfg.Services[7].Key()].id
	if err := c.SetDeleteElements(&gnft.Set{Table: d.tableOf(false), Name: setBE}, []gnft.SetElement{{Key: encBucketKey(id, 1)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	step("a backend element deleted by hand", partial)
	step("idle after the repair", none)

	// An element deleted by hand from one set of ours and one added to
	// another, in two transactions: both sets read back, both repaired.
	if err := c.SetDeleteElements(&gnft.Set{Table: d.tableOf(false), Name: setBE}, []gnft.SetElement{{Key: encBucketKey(id, 0)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if out, err := ns.Exec(ctx, "nft", "add", "element", "ip", DefaultTable, setNodes, "{", "192.0.2.250", "}"); err != nil {
		t.Fatalf("nft add element: %v %s", err, out)
	}
	step("elements changed by hand in two sets", partial)

	// A structural hand edit (a rule of ours deleted): everything is read.
	if out, err := ns.Exec(ctx, "nft", "flush", "chain", "ip", DefaultTable, chainPostrouting); err != nil {
		t.Fatalf("nft flush chain: %v %s", err, out)
	}
	step("a chain of ours flushed by hand", full)
	step("idle after that repair", none)

	// Our own changes keep the gate open.
	cfg.Services[3].Backends = cfg.Services[3].Backends[:2]
	cfg.Services = append(cfg.Services, proxy.Service{Name: "new", VIP: cfg.Services[0].VIP, Port: 9999, Protocol: proxy.UDP,
		Backends: cfg.Services[0].Backends})
	if err := d.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	good = dump(t, ns)
	step("after an Apply of ours", none)

	// The safety net: FullEvery 2 reads every second resync.
	d.opts.FullEvery = 2
	reads := 0
	for i := 0; i < 4; i++ {
		st0 := d.Stats()
		if err := d.Resync(ctx); err != nil {
			t.Fatal(err)
		}
		if d.Stats().Reads > st0.Reads {
			reads++
		}
	}
	if reads != 2 {
		t.Errorf("FullEvery 2: %d of 4 resyncs read back, want 2", reads)
	}
}
