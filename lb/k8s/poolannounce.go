package k8s

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgelb/edgelb/lb"
)

// ReasonAnnounce is the Warning a gateway raises on an IPPool whose
// announce selection it cannot carry out (issue 37): an announcer it does
// not run, a BGP peer it does not have, L2 interfaces that leave its own
// out. Each gateway judges by its own announce section, so the Event's
// source (the gateway's node) says which one; the pool is still used.
const ReasonAnnounce = "AnnounceNotPossible"

// checkPoolAnnounce judges every served pool's announce against this
// gateway's announcers (lb.CheckPoolAnnounce, the standalone writer's and
// the config file's check) and reports each new finding once, as a
// Warning Event on the IPPool and a log line; a finding that goes (the
// pool or the config changed) is logged as cleared. Desired worker only.
func (c *Controller) checkPoolAnnounce(pools []lb.Pool) {
	if c.opts.Announcers == nil {
		return
	}
	next := map[string]string{}
	for i := range pools {
		p := &pools[i]
		if err := lb.ValidatePoolAnnounce(p, *c.opts.Announcers); err != nil {
			next[p.Name] = inSpec(err).Error()
		}
	}
	names := make([]string, 0, len(next))
	for n := range next {
		names = append(names, n)
	}
	sort.Strings(names)
	log := c.opts.Logger
	for _, n := range names {
		msg := next[n]
		if c.announceWarned[n] == msg {
			continue
		}
		log.Warn("IPPool announce not possible on this gateway: its VIPs are not announced as it asks", "pool", n, "err", msg)
		if o, ok, _ := c.poolInf.GetStore().GetByKey(n); ok {
			if obj, ok := o.(runtime.Object); ok {
				c.recorder.Event(obj, corev1.EventTypeWarning, ReasonAnnounce,
					fmt.Sprintf("gateway %s cannot announce this pool as its announce asks: %s", c.opts.NodeName, msg))
			}
		}
	}
	for n := range c.announceWarned {
		if _, still := next[n]; !still {
			log.Info("IPPool announce possible on this gateway again", "pool", n)
		}
	}
	c.announceWarned = next
}
