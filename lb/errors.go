package lb

import (
	"errors"

	"github.com/edgelb/edgelb/lb/fielderr"
)

// Sentinel errors; match with errors.Is. The REST API maps them to statuses:
// FieldError → 400, ErrNotFound → 404, ConflictError/ErrConflict → 409.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrExhausted = errors.New("no address available")
)

// FieldError is bad input: it names the field and quotes the value. It
// lives in the leaf package fielderr so that packages lb imports can
// return it too.
type FieldError = fielderr.Error

// Errors is every problem of one input (a service, a pool, a config
// file), each a *FieldError with its path.
type Errors = fielderr.Errors

// ConflictError is a valid request that clashes with current state (an
// overlap with another pool, an address in use). errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ConflictError) Error() string { return e.Reason }

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
