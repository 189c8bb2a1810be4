package config

import (
	"errors"

	"github.com/edgelb/edgelb/lb"
)

// rawServiceAllocation is a pool's serviceAllocation as written: the lb
// type itself (plain numbers, strings and selectors; nothing to parse).
type rawServiceAllocation = lb.ServiceAllocation

// validateAllocation reports a pool's serviceAllocation problems with the
// one validator; in a file (standalone) only priority applies.
func validateAllocation(col *collector, path string, p *lb.Pool) {
	var fe *lb.FieldError
	if err := lb.ValidateStandaloneAllocation(p.Allocation); errors.As(err, &fe) {
		col.addErr(path+"."+fe.Field, fe.Value, fe.Err)
	} else if err != nil {
		col.addErr(path+".serviceAllocation", "", err)
	}
}
