package k8s

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/edgelb/edgelb/lb"
)

// The gateway's own addresses (issue 36) in cluster mode. Three places:
//   - the leader refuses an IPPool whose range holds one and a Service
//     requesting one (write time: when it first sees the object, or its
//     addresses or request change), against the current set (SetOwnAddrs);
//   - a pool once accepted is not rejected because an address became own
//     later: rejecting it would release every address its Services hold
//     (and on the leader only, since each gateway has its own addresses);
//   - every gateway leaves out of what it programs each Service whose VIP
//     or backend is one of ITS own addresses (OwnFilter, ownfilter.go),
//     and reports it on the Service.

// ownAddrs is the gateway's current own-address set (nil: none known).
func (c *Controller) ownAddrs() *lb.OwnAddrs { return c.own.Load() }

// SetOwnAddrs replaces the gateway's own addresses (the daemon calls it
// when its interfaces' addresses change). IPPools are judged again (a new
// or changed one against the new set), and the desired state rebuilt.
func (c *Controller) SetOwnAddrs(_ context.Context, own *lb.OwnAddrs) error {
	if c.ownAddrs().Equal(own) {
		return nil
	}
	c.own.Store(own)
	c.poolsChanged()
	return nil
}

// parsePool parses an IPPool object for this controller: the own-address
// check applies to a pool (by UID) whose ranges it has not accepted
// before, so an address that becomes own later never rejects a pool in
// use (see above).
func (c *Controller) parsePool(u *unstructured.Unstructured) (lb.Pool, error) {
	p, err := poolFromObject(u, nil)
	if err != nil {
		return p, err
	}
	key := string(u.GetUID()) + " " + strings.Join(p.RangeStrings(), ",")
	c.ownMu.Lock()
	passed := c.ownPassed[u.GetName()] == key
	c.ownMu.Unlock()
	if passed {
		return p, nil
	}
	if own := c.ownAddrs(); own.Len() > 0 {
		if _, err := poolFromObject(u, own); err != nil {
			return p, err
		}
	}
	c.ownMu.Lock()
	c.ownPassed[u.GetName()] = key
	c.ownMu.Unlock()
	return p, nil
}
