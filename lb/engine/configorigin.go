package engine

import (
	"fmt"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
)

// The rule for objects from the config file (issue 14): the file is their
// only source. A REST write (PUT/DELETE of a service, PUT/DELETE of a pool)
// to one whose origin is config is refused with a *lb.ConflictError (409)
// naming the file, and nothing changes. A REST change would otherwise be
// undone, silently, at the next restart or SIGHUP (SyncConfig re-reads the
// file) — and a deleted service would come back with a different VIP. The
// rule reads only the stored origin, so it is the same before and after a
// restart (origins are persisted) and after a SIGHUP (SyncConfig keeps them).

// refuseConfigOrigin returns the 409 for a REST write to a config-file object.
func (e *Engine) refuseConfigOrigin(kind, name string, origin store.Origin) error {
	if origin != store.OriginConfig || e.opts.Fleet {
		// A fleet's store is the truth; files only seed it (fleet.go).
		return nil
	}
	file := e.opts.ConfigFile
	if file == "" {
		file = "the config file"
	}
	return &lb.ConflictError{Field: "name", Value: name,
		Reason: fmt.Sprintf("%s %q comes from %s: change or remove it there and reload (SIGHUP); the REST API does not change config-file %ss",
			kind, name, file, kind)}
}
