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
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	for key, whys := range bySvc {
		sort.Strings(whys)
		msg := "this gateway's dataplane refused it (other Services are served): " + strings.Join(whys, "; ")
		if c.refused[key] == msg {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		svc, err := c.services.Services(ns).Get(name)
		if err != nil {
			continue // gone meanwhile
		}
		c.recorder.Event(svc, corev1.EventTypeWarning, ReasonRefused, msg)
	}
	next := make(map[string]string, len(bySvc))
	for key, whys := range bySvc {
		next[key] = "this gateway's dataplane refused it (other Services are served): " + strings.Join(whys, "; ")
	}
	c.refused = next
	return nil
}
