//go:build netns

package nft

import (
	"os/exec"
	"testing"
	"time"

	gnft "github.com/google/nftables"

	"github.com/edgelb/edgelb/lab/netns"
)

// TestNetnsLayoutListable loads every kind of chain and rule the layout has
// (each pick and post variant, both families) rule by rule and checks that
// the nft CLI still reads the ruleset back: an unreadable rule would break
// `nft list ruleset` for everyone on the host, not only for edgelb.
func TestNetnsLayoutListable(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft CLI not installed")
	}
	ns := netns.NewT(t, "nflay")
	c, err := gnft.New(gnft.WithNetNSFd(int(ns.Handle())))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		tb := &gnft.Table{Family: f.family, Name: "edgelb"}
		c.AddTable(tb)
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, s := range f.setDefs(tb) {
			if err := c.AddSet(s, nil); err != nil {
				t.Fatal(err)
			}
			if err := c.Flush(); err != nil {
				t.Fatalf("set %s: %v", s.Name, err)
			}
		}
		chains := baseChains(tb)
		for _, p := range []pick{{pickRandom, 3, false}, {pickSrcHash, 3, false}, {pickDstHash, 2, false}, {pickRandom, 3, true}, {pickSrcHash, 3, true}, {pickMaglev, 251, false}, {pickMaglev, 1021, true}} {
			chains = append(chains, &gnft.Chain{Table: tb, Name: p.chain()})
		}
		for _, p := range []post{{true, 0}, {false, 0}, {true, 300 * time.Second}, {false, 5 * time.Millisecond}} {
			chains = append(chains, &gnft.Chain{Table: tb, Name: p.chain()})
		}
		for _, ch := range chains {
			c.AddChain(ch)
			if err := c.Flush(); err != nil {
				t.Fatalf("chain %s: %v", ch.Name, err)
			}
			for _, r := range f.rulesOf(ch.Name) {
				c.AddRule(r.build(tb, ch.Name))
				if err := c.Flush(); err != nil {
					t.Fatalf("rule %s %s/%s: %v", f, ch.Name, r.name, err)
				}
				if out, err := ns.Exec(t.Context(), "nft", "list", "chain", f.String(), "edgelb", ch.Name); err != nil {
					t.Errorf("rule %s %s/%s breaks nft list: %v %s", f, ch.Name, r.name, err, out)
				}
			}
		}
	}
	out, err := ns.Exec(t.Context(), "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}
