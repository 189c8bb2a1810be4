package nft

import "github.com/edgelb/edgelb/proxy"

// Check reports whether this dataplane can program s, without touching the
// kernel: `edgelb check` and start-up refuse schedulers and methods
// nftables cannot express (wrapping proxy.ErrUnsupported) before anything
// is programmed, never downgrading them silently.
func Check(s proxy.Service) error {
	_, err := prepare(&s)
	return err
}
