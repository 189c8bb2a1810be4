package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
)

// Errors is every problem found in a config, in file order. Each is an
// *lb.FieldError naming the field path (services[2].ports[0].port) and
// quoting the bad value. errors.As(err, &fieldErr) finds the first one;
// range over List to print them all.
type Errors struct {
	// Source is the file the config came from ("" for Parse).
	Source string
	List   []*lb.FieldError
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

// Unwrap exposes each FieldError to errors.Is and errors.As.
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

// Lines renders one line per error, for `edgelb check`.
func (e *Errors) Lines() []string {
	out := make([]string, len(e.List))
	for i, fe := range e.List {
		out[i] = fe.Error()
	}
	return out
}

// collector gathers errors; the first error reported for a field path wins,
// so a value that failed to parse is not reported again by validation.
type collector struct {
	list []*lb.FieldError
	seen map[string]bool
	// inside holds every path that has an error at or below it
	// ("services[4]" for "services[4].backends[2].address"), so failed is
	// a lookup: scanning seen made a config with many errors quadratic
	// (5,000 services each with 11 errors took 160 s to report).
	inside map[string]bool
}

func (c *collector) add(field, value string, format string, args ...any) {
	c.addErr(field, value, fmt.Errorf(format, args...))
}

func (c *collector) addErr(field, value string, err error) {
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[field] {
		return
	}
	c.seen[field] = true
	if c.inside == nil {
		c.inside = map[string]bool{}
	}
	for p := field; p != ""; p = parentPath(p) {
		if c.inside[p] {
			break // and so are its ancestors
		}
		c.inside[p] = true
	}
	c.list = append(c.list, &lb.FieldError{Field: field, Value: value, Err: err})
}

// parentPath drops the last element of a field path: "a[1].b" → "a[1]" → "a".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// anyFailed reports whether any error was recorded (so failed can be
// skipped, and its field path not built, in the common case).
func (c *collector) anyFailed() bool { return len(c.inside) > 0 }

// failed reports whether an error was already recorded at field or inside it.
func (c *collector) failed(field string) bool {
	return c.inside[field]
}

func (c *collector) err(source string) error {
	if len(c.list) == 0 {
		return nil
	}
	// Group by section and item (services[2] before services[10]); errors
	// of one item keep the order they were found in.
	sort.SliceStable(c.list, func(i, j int) bool { return pathLess(c.list[i].Field, c.list[j].Field) })
	return &Errors{Source: source, List: c.list}
}

// sectionRank orders the top-level sections as the reference documents them.
var sectionRank = map[string]int{"yaml": 0, "config": 1, "pools": 2, "services": 3, "announce": 4,
	"dataplane": 5, "api": 6, "kubernetes": 7, "state": 8, "health": 9, "log": 10}

// pathLess orders field paths by section, then by their list indexes
// (a path with fewer indexes first); other paths compare equal.
func pathLess(a, b string) bool {
	ra, rb := rankOf(a), rankOf(b)
	if ra != rb {
		return ra < rb
	}
	ia, ib := indexesOf(a), indexesOf(b)
	for k := 0; k < len(ia) && k < len(ib); k++ {
		if ia[k] != ib[k] {
			return ia[k] < ib[k]
		}
	}
	return len(ia) < len(ib)
}

func rankOf(path string) int {
	end := strings.IndexAny(path, ".[")
	if end < 0 {
		end = len(path)
	}
	if r, ok := sectionRank[path[:end]]; ok {
		return r
	}
	return len(sectionRank)
}

func indexesOf(path string) []int {
	var out []int
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			return out
		}
		n, err := strconv.Atoi(path[i+1 : i+j])
		if err == nil {
			out = append(out, n)
		}
		path = path[i+j:]
	}
}

// join builds a field path: join("services[2]", "ports") = "services[2].ports".
func join(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

// index is parent[i]; built for every list element of a config (110,000
// for 10,000 services × 10 backends), so without fmt.
func index(parent string, i int) string {
	b := make([]byte, 0, len(parent)+8)
	b = append(b, parent...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(append(b, ']'))
}
