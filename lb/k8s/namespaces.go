package k8s

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// namespaceChanged re-queues the Services of a namespace whose labels
// changed: pools' namespaceSelectors may now admit them, or no longer.
func (c *Controller) namespaceChanged(o, n any) {
	b, ok := n.(*corev1.Namespace)
	if !ok {
		return
	}
	if a, ok := o.(*corev1.Namespace); ok && maps.Equal(a.Labels, b.Labels) {
		return
	}
	t := c.view().term
	if t == nil {
		return
	}
	svcs, _ := c.services.Services(b.Name).List(labels.Everything())
	for _, s := range svcs {
		t.svcQ.Add(s.Namespace + "/" + s.Name)
	}
}

// namespaceLabels returns the labels of a namespace from the cache (none
// when it is not there: a selector on labels then does not match).
func (c *Controller) namespaceLabels(ns string) map[string]string {
	if n, err := c.namespaces.Get(ns); err == nil {
		return n.Labels
	}
	return nil
}
