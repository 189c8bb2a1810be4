package config

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The YAML is parsed into generic values with json.Number (decodeYAML, the
// go-yaml v2 parser sigs.k8s.io/yaml wraps, without its JSON round trip),
// and then walked into the raw structs below by this small strict decoder. Doing the walk ourselves (instead of
// json.Unmarshal with DisallowUnknownFields) lets every problem be reported
// at once with its exact path — services[2].ports[0].port — instead of
// stopping at the first one with a Go type name in the message.

type fieldInfo struct {
	name  string
	index int
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

func fieldsOf(t reflect.Type) []fieldInfo {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]fieldInfo)
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, fieldInfo{name: name, index: i})
	}
	fieldCache.Store(t, out)
	return out
}

func isField(fields []fieldInfo, k string) bool {
	for _, f := range fields {
		if f.name == k {
			return true
		}
	}
	return false
}

// fieldPath is where decodeValue is: a stack of steps pushed and popped as
// it descends, rendered ("services[4].backends[2].address") only when an
// error needs it. Decoding visits every field of every service — over a
// million at 10,000 services × 10 backends — and building every path string
// eagerly was a fifth of a parse's allocations (issue 18: start-up).
type fieldPath struct{ steps []pathStep }

// pathStep is a mapping key (which may be empty), or a list index.
type pathStep struct {
	key   string
	idx   int
	isIdx bool
}

func (p *fieldPath) key(k string) { p.steps = append(p.steps, pathStep{key: k}) }
func (p *fieldPath) index(i int)  { p.steps = append(p.steps, pathStep{idx: i, isIdx: true}) }
func (p *fieldPath) pop()         { p.steps = p.steps[:len(p.steps)-1] }

// String renders the path as join and index do; the root is "".
func (p *fieldPath) String() string {
	var b []byte
	for _, st := range p.steps {
		if st.isIdx {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(st.idx), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 { // as join: no dot after an empty parent
			b = append(b, '.')
		}
		b = append(b, st.key...)
	}
	return string(b)
}

// decodeValue stores v (a generic JSON value) into dst, reporting problems
// under path. It never panics on any input.
func decodeValue(v any, dst reflect.Value, path *fieldPath, c *collector) {
	if v == nil {
		return // `key:` or `key: null`: keep the zero value (the default)
	}
	switch dst.Kind() {
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		decodeValue(v, p.Elem(), path, c)
		dst.Set(p)
	case reflect.Struct:
		ps, isPairs := v.(pairs)
		m, ok := v.(map[string]any)
		if !ok && !isPairs {
			c.add(path.String(), render(v), "want a mapping (key: value), got %s", kindOf(v))
			return
		}
		size := len(m)
		if isPairs {
			size = len(ps)
		}
		fields := fieldsOf(dst.Type())
		matched := 0
		for _, f := range fields {
			var fv any
			if isPairs {
				fv, ok = ps.get(f.name)
			} else {
				fv, ok = m[f.name]
			}
			if ok {
				matched++
				path.key(f.name)
				decodeValue(fv, dst.Field(f.index), path, c)
				path.pop()
			}
		}
		if matched == size {
			break // every key is a field (keys are unique): nothing unknown
		}
		if isPairs {
			m = ps.asMap()
		}
		for _, k := range sortedKeys(m) {
			if !isField(fields, k) {
				name := k
				if strings.TrimSpace(name) == "" {
					name = strconv.Quote(k) // an empty key still needs a visible path
				}
				c.add(join(path.String(), name), "", "unknown field%s", suggest(k, fields))
			}
		}
	case reflect.Map:
		// String-keyed mappings (label selectors' matchLabels).
		if ps, isPairs := v.(pairs); isPairs {
			v = ps.asMap()
		}
		m, ok := v.(map[string]any)
		if !ok || dst.Type().Key().Kind() != reflect.String {
			c.add(path.String(), render(v), "want a mapping (key: value), got %s", kindOf(v))
			return
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for _, k := range sortedKeys(m) {
			e := reflect.New(dst.Type().Elem()).Elem()
			path.key(k)
			decodeValue(m[k], e, path, c)
			path.pop()
			out.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), e)
		}
		dst.Set(out)
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			c.add(path.String(), render(v), "want a list, got %s", kindOf(v))
			return
		}
		s := reflect.MakeSlice(dst.Type(), len(l), len(l))
		for i, e := range l {
			path.index(i)
			decodeValue(e, s.Index(i), path, c)
			path.pop()
		}
		dst.Set(s)
	case reflect.String:
		s, ok := v.(string)
		if !ok && dst.Type() == reflect.TypeOf(duration("")) {
			c.add(path.String(), render(v), "want a duration with a unit, like \"10s\" or \"500ms\"")
			return
		}
		if !ok {
			c.add(path.String(), render(v), "want a string, got %s (quote the value)", kindOf(v))
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			c.add(path.String(), render(v), "want true or false, got %s", kindOf(v))
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := integer(v)
		if !ok {
			c.add(path.String(), render(v), "want an integer, got %s", kindOf(v))
			return
		}
		if dst.OverflowInt(n) {
			c.add(path.String(), render(v), "integer out of range")
			return
		}
		dst.SetInt(n)
	default:
		// Only the kinds above appear in the raw structs.
		c.add(path.String(), render(v), "internal: cannot decode into %s", dst.Type())
	}
}

// integer accepts a JSON number that is a whole number within int64.
func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || f > math.MaxInt64/2 || f < math.MinInt64/2 {
		return 0, false
	}
	return int64(f), true
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any, pairs:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// render quotes a value for an error message, shortened.
func render(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = string(x)
	case bool:
		s = strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		s = string(b)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// suggest names the known field closest to an unknown one.
func suggest(k string, fields []fieldInfo) string {
	best, bestD := "", 3
	for _, f := range fields {
		if strings.EqualFold(f.name, k) {
			return fmt.Sprintf(" (did you mean %q?)", f.name)
		}
		if d := distance(strings.ToLower(k), strings.ToLower(f.name)); d < bestD {
			best, bestD = f.name, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return " (known fields: " + strings.Join(names, ", ") + ")"
}

// distance is the Levenshtein distance, bounded to short keys.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
