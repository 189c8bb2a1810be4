package k8s

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonRefused is the Warning a gateway's dataplane refusing one of a
// Service's ports raises on that Service (issue 14); the other Services are
// programmed regardless.
const ReasonRefused = "DataplaneRefused"

// SetRefused takes the services this gateway's dataplane refused at its
// last apply (proxy.Service names as desired.go renders them,
// "ns/name[/port][/nodeport]" → reason) and raises one Warning Event per
// Service, naming the gateway (the event source) and the reason. Every
// gateway calls it for its own dataplane, leader or not. A refusal already
// reported is not repeated until it clears.
func (c *Controller) SetRefused(_ context.Context, refused map[string]string) error {
	bySvc := map[string][]string{}
	for name, why := range refused {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) < 2 {
			continue
		}
		key := parts[0] + "/" + parts[1]
		bySvc[key] = append(bySvc[key], why)
	}
	next := make(map[string]string, len(bySvc))
	for key, whys := range bySvc {
		sort.Strings(whys)
		next[key] = "this gateway's dataplane refused it (other Services are served): " + strings.Join(whys, "; ")
	}
	// What was reported lives on the keeper; the Events are sent here.
	var raise []string
	c.do(func(k *keeper) {
		for key, msg := range next {
			if k.refused[key] != msg {
				raise = append(raise, key)
			}
		}
		k.refused = next
	})
	sort.Strings(raise)
	for _, key := range raise {
		ns, name, _ := strings.Cut(key, "/")
		svc, err := c.services.Services(ns).Get(name)
		if err != nil {
			continue // gone meanwhile
		}
		c.recorder.Event(svc, corev1.EventTypeWarning, ReasonRefused, next[key])
	}
	return nil
}
