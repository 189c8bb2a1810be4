//go:build ipvsguest

package ipvs

import (
	"testing"

	"github.com/edgelb/edgelb/lab/netns"
	"github.com/edgelb/edgelb/proxy"
	"github.com/edgelb/edgelb/proxy/nft"
)

// The nftables dataplane, measured in the same guest for the same work.
func init() {
	benchDataplanes = append(benchDataplanes, struct {
		name string
		new  dpFactory
	}{"nftables", func(tb testing.TB, n *netns.NS) proxy.Dataplane {
		d, err := nft.New(nft.Options{NetNS: int(n.Handle())})
		if err != nil {
			tb.Fatalf("nft.New in %s: %v", n.Name, err)
		}
		return d
	}})
}
