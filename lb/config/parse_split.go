package config

import (
	"reflect"

	"github.com/edgelb/edgelb/lb"
)

// parseSplit is parse for a document splitYAML takes apart. Each chunk of
// `services:` items is decoded and converted to lb.ServiceSpec on the core
// that read it, right after reading it, with a collector of its own; the
// chunks' specs and errors are then joined in order and the whole Config
// is validated as parse validates it. So the document's generic values and
// raw structs are never alive all at once: in a fresh process every byte
// of heap the parse holds at its peak is a page the kernel must fault in,
// and at 10,000 services × 10 backends the whole-document values made the
// config phase fault in ~95 MiB (~25,000 page faults, most of its time on
// a VM where one costs 14–17 µs; issue 18: start to ready).
//
// ok is false when the document is not split or a chunk's YAML is refused:
// then parse reads it whole, and any YAML error (with its line number)
// comes from there. Field errors are the same either way: each item is
// decoded at its own index, exactly as decodeValue walks the whole list
// (FuzzParseSplitSameAsWhole).
func parseSplit(data []byte, e env) (cfg *Config, ok bool, err error) {
	d, ok := splitYAML(data)
	if !ok {
		return nil, false, nil
	}
	var c collector
	var raw rawConfig
	decodeValue(d.head, reflect.ValueOf(&raw).Elem(), &fieldPath{}, &c)
	// The dataplane's snat decides services' default method; its errors
	// are reported by convert below, once.
	snat := convertDataplane(&raw.Dataplane, &collector{}).SNAT

	type part struct {
		specs []lb.ServiceSpec
		c     collector
	}
	parts := make([]part, len(d.chunks))
	if !d.items(func(chunk int, items []any) {
		p := &parts[chunk]
		p.specs = make([]lb.ServiceSpec, 0, len(items))
		var path fieldPath
		path.key("services")
		for j, item := range items {
			n := d.first[chunk] + j
			var rs rawService
			path.index(n)
			decodeValue(item, reflect.ValueOf(&rs).Elem(), &path, &p.c)
			path.pop()
			items[j] = nil // decoded: garbage from here on
			p.specs = append(p.specs, convertService(&rs, index("services", n), snat, &p.c))
		}
	}) {
		return nil, false, nil
	}

	cfg = convert(&raw, e, &c) // raw holds no services: they are in parts
	n := 0
	for i := range parts {
		n += len(parts[i].specs)
	}
	cfg.Services = make([]lb.ServiceSpec, 0, n)
	for i := range parts {
		cfg.Services = append(cfg.Services, parts[i].specs...)
		for _, fe := range parts[i].c.list {
			c.addErr(fe.Field, fe.Value, fe.Err)
		}
		parts[i] = part{}
	}
	cfg.validate(&c)
	if err := c.err(""); err != nil {
		return nil, true, err
	}
	return cfg, true, nil
}
