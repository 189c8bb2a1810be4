package lb

import (
	"errors"
	"fmt"
)

// Sentinel errors; match with errors.Is. The REST API maps them to statuses:
// FieldError → 400, ErrNotFound → 404, ConflictError/ErrConflict → 409.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrExhausted = errors.New("no address available")
)

// FieldError is bad input: it names the field and quotes the value.
type FieldError struct {
	Field string
	Value string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// ConflictError is a valid request that clashes with current state (an
// overlap with another pool, an address in use). errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ConflictError) Error() string { return e.Reason }

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
