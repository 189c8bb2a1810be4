package k8s

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonRefused is the Warning a gateway raises on a Service it does not
// serve whole (issue 14): its dataplane refused one of the Service's
// ports, or a VIP or backend of it is one of this gateway's own addresses
// (issue 36, OwnFilter); the other Services are programmed regardless.
const ReasonRefused = "DataplaneRefused"

// The two sources of a gateway's refusals: each replaces its own part.
const (
	fromDataplane = iota // the effects loop: what the dataplane refused at its last apply
	fromOwn              // OwnFilter: left out for an own address
	refusalSources
)

// SetRefused takes the services this gateway's dataplane refused at its
// last apply (proxy.Service names as desired.go renders them,
// "ns/name[/port][/nodeport]" → reason) and raises one Warning Event per
// Service, naming the gateway (the event source) and the reason. Every
// gateway calls it for its own dataplane, leader or not. A refusal already
// reported is not repeated until it clears.
func (c *Controller) SetRefused(_ context.Context, refused map[string]string) error {
	c.setRefusals(fromDataplane, refused)
	return nil
}

// SetOwnRefused takes the Services this gateway's OwnFilter leaves out
// ("ns/name" → why) and reports them as SetRefused does, in the same one
// Warning per Service (both sources' reasons together).
func (c *Controller) SetOwnRefused(_ context.Context, hit map[string]string) error {
	c.setRefusals(fromOwn, hit)
	return nil
}

// refusalSourceNames label edgelb_k8s_refused_services.
var refusalSourceNames = [refusalSources]string{fromDataplane: "dataplane", fromOwn: "own-address"}

var refusalPrefix = [refusalSources]string{
	fromDataplane: "this gateway's dataplane refused it (other Services are served): ",
	fromOwn:       "on this gateway (other Services are served): ",
}

func (c *Controller) setRefusals(src int, refused map[string]string) {
	// What was reported lives on the keeper; the Events are sent here.
	var raise []string
	var next map[string]string
	services := map[string]bool{}
	for name := range refused {
		services[serviceKey(name)] = true
	}
	c.m.refused.WithLabelValues(refusalSourceNames[src]).Set(float64(len(services)))
	c.do(func(k *keeper) {
		k.refusals[src] = refused
		next = refusalMessages(k.refusals)
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
}

// refusalMessages is one message per Service key from every source's
// refusals (keyed by proxy.Service name or Service key).
func refusalMessages(srcs [refusalSources]map[string]string) map[string]string {
	bySvc := map[string][refusalSources][]string{}
	for src, refused := range srcs {
		for name, why := range refused {
			parts := strings.SplitN(name, "/", 3)
			if len(parts) < 2 {
				continue
			}
			key := parts[0] + "/" + parts[1]
			w := bySvc[key]
			w[src] = append(w[src], why)
			bySvc[key] = w
		}
	}
	next := make(map[string]string, len(bySvc))
	for key, whys := range bySvc {
		var msg []string
		for src, ws := range whys {
			if len(ws) > 0 {
				sort.Strings(ws)
				msg = append(msg, refusalPrefix[src]+strings.Join(ws, "; "))
			}
		}
		next[key] = strings.Join(msg, "; ")
	}
	return next
}
