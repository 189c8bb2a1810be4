package config

import (
	"sort"
	"strconv"
	"strings"

	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/fielderr"
)

// Errors is every problem found in a config, sorted by section and item.
// Each is an *lb.FieldError naming the field path
// (services[2].ports[0].port) and quoting the bad value. errors.As(err,
// &fieldErr) finds the first one; range over List to print them all.
type Errors = lb.Errors

// collector gathers a file's errors (fielderr.Collector: the first error
// reported for a field path wins, so a value that failed to parse is not
// reported again by validation).
type collector struct{ fielderr.Collector }

func (c *collector) add(field, value string, format string, args ...any) {
	c.Add(field, value, format, args...)
}

func (c *collector) addErr(field, value string, err error) { c.AddErr(field, value, err) }

func (c *collector) failed(field string) bool { return c.Failed(field) }

func (c *collector) err(source string) error {
	list := c.List()
	if len(list) == 0 {
		return nil
	}
	// Group by section and item (services[2] before services[10]); errors
	// of one item keep the order they were found in.
	sort.SliceStable(list, func(i, j int) bool { return pathLess(list[i].Field, list[j].Field) })
	return &Errors{Source: source, List: list}
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

func index(parent string, i int) string { return fielderr.Index(parent, i) }
