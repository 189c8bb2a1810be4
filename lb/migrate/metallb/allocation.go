package metallb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgelb/edgelb/lb"
)

// serviceAllocation converts an IPAddressPool's spec.serviceAllocation
// into edgelb's (the same fields and semantics), checked by edgelb's one
// validator. Fields edgelb does not know are reported.
func (c *converter) serviceAllocation(o *Object, m map[string]any, p *Pool) error {
	const at = "spec.serviceAllocation"
	sa := &lb.ServiceAllocation{}
	if n, ok := takeInt(m, "priority"); ok {
		sa.Priority = int(n)
	}
	if v, ok := take(m, "namespaces"); ok {
		if err := decodeStrict(v, &sa.Namespaces); err != nil {
			return fieldErr(o, at+".namespaces", show(v), err.Error())
		}
	}
	for _, f := range []struct {
		key string
		dst *[]lb.LabelSelector
	}{{"namespaceSelectors", &sa.NamespaceSelectors}, {"serviceSelectors", &sa.ServiceSelectors}} {
		if v, ok := take(m, f.key); ok {
			if err := decodeStrict(v, f.dst); err != nil {
				return fieldErr(o, at+"."+f.key, show(v), err.Error())
			}
		}
	}
	for _, f := range leftovers(at, m) {
		c.unsupported(o, f, nil, "no edgelb equivalent")
	}
	if err := lb.ValidateAllocation(sa); err != nil {
		var fe *lb.FieldError
		if errors.As(err, &fe) {
			return fieldErr(o, "spec."+fe.Field, fe.Value, fe.Err.Error())
		}
		return fieldErr(o, at, "", err.Error())
	}
	if !sa.HasSelectors() {
		c.note(o, at, nil, "MetalLB never auto-assigns from a pool whose serviceAllocation has no namespaces or selectors; "+
			"edgelb lets such a pool serve every Service, tried in priority order before pools without serviceAllocation")
	} else {
		c.note(o, at, nil, "namespaces and selectors are kept in the IPPool objects (cluster mode); the standalone config keeps only the priority: "+
			"standalone services have no namespace or labels")
	}
	p.ServiceAllocation = sa
	return nil
}

// decodeStrict re-decodes a generic YAML value into a typed one, refusing
// unknown fields (a newer MetalLB's selector field is not silently dropped).
func decodeStrict(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		return fmt.Errorf("not a valid value: %v", err)
	}
	return nil
}

// standaloneAllocation is what a standalone pool keeps: the priority only.
func standaloneAllocation(a *lb.ServiceAllocation) *lb.ServiceAllocation {
	if a == nil || a.Priority == 0 {
		return nil
	}
	return &lb.ServiceAllocation{Priority: a.Priority}
}
