// Package fielderr holds the error types of bad input: one problem naming
// its field path and quoting the value (Error), and every problem of one
// input at once (Errors, gathered by a Collector). It is a leaf package so
// that packages below lb (announce/bgp) can return the same errors as the
// validator in lb without importing lb.
package fielderr

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is bad input: it names the field and quotes the value.
type Error struct {
	Field string
	Value string
	Err   error
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in one input, in the order found (a
// config file's are sorted by section and item). errors.As(err, &fe)
// finds the first *Error; range over List to print them all.
type Errors struct {
	// Source is the file the input came from ("" for a body or a string).
	Source string
	List   []*Error
}

func (e *Errors) Error() string {
	var b strings.Builder
	if e.Source != "" {
		fmt.Fprintf(&b, "%s: ", e.Source)
	}
	if len(e.List) == 1 {
		b.WriteString(e.List[0].Error())
		return b.String()
	}
	fmt.Fprintf(&b, "%d errors:", len(e.List))
	for _, fe := range e.List {
		b.WriteString("\n  ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Unwrap exposes each Error to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, fe := range e.List {
		out[i] = fe
	}
	return out
}

// Others renders every error but the i-th, for a message that leads with
// that one: "; also A; B", or "" when there is no other.
func (e *Errors) Others(i int) string {
	var rest []string
	for k, fe := range e.List {
		if k != i {
			rest = append(rest, fe.Error())
		}
	}
	if len(rest) == 0 {
		return ""
	}
	return "; also " + strings.Join(rest, "; ")
}

// Collector gathers errors; the first error reported for a field path
// wins, so a value that failed to parse is not reported again by
// validation. The zero value is ready to use.
type Collector struct {
	list []*Error
	seen map[string]bool
	// inside holds every path that has an error at or below it
	// ("services[4]" for "services[4].backends[2].address"), so Failed is
	// a lookup: scanning seen made a config with many errors quadratic
	// (5,000 services each with 11 errors took 160 s to report).
	inside map[string]bool
}

// Add records a problem at field with the bad value quoted.
func (c *Collector) Add(field, value string, format string, args ...any) {
	c.AddErr(field, value, fmt.Errorf(format, args...))
}

// AddErr records err at field (kept as the *Error's Err, for errors.Is).
func (c *Collector) AddErr(field, value string, err error) {
	if c.seen == nil {
		c.seen = map[string]bool{}
		c.inside = map[string]bool{}
	}
	if c.seen[field] {
		return
	}
	c.seen[field] = true
	for p := field; p != ""; p = Parent(p) {
		if c.inside[p] {
			break // and so are its ancestors
		}
		c.inside[p] = true
	}
	c.list = append(c.list, &Error{Field: field, Value: value, Err: err})
}

// Parent drops the last element of a field path: "a[1].b" → "a[1]" → "a".
func Parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// AnyFailed reports whether any error was recorded (so Failed can be
// skipped, and its field path not built, in the common case).
func (c *Collector) AnyFailed() bool { return len(c.list) > 0 }

// Failed reports whether an error was already recorded at field or inside it.
func (c *Collector) Failed(field string) bool { return c.inside[field] }

// List is what was recorded, in order.
func (c *Collector) List() []*Error { return c.list }

// Err is nil without problems, else *Errors holding them all.
func (c *Collector) Err() error {
	if len(c.list) == 0 {
		return nil
	}
	return &Errors{List: c.list}
}

// Join builds a field path: Join("services[2]", "ports") = "services[2].ports".
func Join(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

// Index is parent[i]; built for list elements, so without fmt.
func Index(parent string, i int) string {
	b := make([]byte, 0, len(parent)+8)
	b = append(b, parent...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(append(b, ']'))
}
