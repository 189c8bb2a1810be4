package config

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// fastItems reads a chunk of `services:` items (splitServices' pieces) when
// every item is written in the narrow shape generators and people use for
// long lists — one flow mapping per line, or a block mapping whose values
// are one-line flow collections or scalars — and gives the values go-yaml
// plus jsonable would give. go-yaml reads such text at ~8 MB/s on one core
// (the bulk of a 10,000-service start-up, issue 18); this at 45–80 MB/s
// (BenchmarkFastItems), most of it building the generic values.
//
// It is conservative by construction: a scalar is taken only when its YAML
// 1.1 type cannot be in doubt (a plain decimal integer, a word starting with
// a letter that is none of YAML 1.1's boolean or null spellings, a dotted
// number such as an IPv4 address, a quoted string without escapes, true,
// false, null). Anything else — floats, octal or hex, escapes, anchors,
// tags, comments after a value, multi-line values, nested blocks, duplicate
// keys, trailing commas — gives ok=false and the chunk goes to go-yaml,
// which reads it (or reports its error) as before. FuzzFastItemsSameAsGoYAML
// holds: whatever fastItems accepts, go-yaml reads the same.
func fastItems(chunk []byte) (items []any, ok bool) {
	if !printable(chunk, true) {
		return nil, false // go-yaml refuses such a stream, comments included
	}
	p := fastParser{}
	lines := bytes.Split(chunk, []byte("\n"))
	item := -1 // indentation of "- "; all items share it
	var cur map[string]any
	for _, ln := range lines {
		t := bytes.TrimLeft(ln, " ")
		if len(t) == 0 || t[0] == '#' {
			continue // blank or a whole-line comment
		}
		n := len(ln) - len(t)
		switch {
		case t[0] == '-' && (item < 0 || n == item):
			if len(t) < 2 || t[1] != ' ' {
				return nil, false
			}
			item = n
			rest := t[2:]
			if len(rest) > 0 && rest[0] == ' ' {
				return nil, false // the item's keys would sit deeper than item+2
			}
			if len(rest) > 0 && rest[0] == '{' {
				p.s, p.i = rest, 0
				v, ok := p.flowMapping()
				if !ok || !p.atEnd() {
					return nil, false
				}
				items = append(items, v)
				cur = nil
				continue
			}
			cur = map[string]any{}
			items = append(items, cur)
			if !p.blockPair(rest, cur) {
				return nil, false
			}
		case cur != nil && n == item+2:
			if !p.blockPair(t, cur) {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return items, len(items) > 0
}

// fastParser scans one line at a time.
type fastParser struct {
	s     []byte
	i     int
	stack []any  // flowSequence's values until their list is made
	kvs   []pair // flowMapping's pairs until their mapping is made
	// keys holds the plain keys read so far by their text: the same few
	// keys (address, weight, port...) repeat on every item, and each
	// would be a string allocated again.
	keys map[string]string
}

func (p *fastParser) skipSpaces() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// atEnd: only spaces are left on the line.
func (p *fastParser) atEnd() bool {
	p.skipSpaces()
	return p.i == len(p.s)
}

// blockPair reads `key: value` (the value on the same line) into m.
func (p *fastParser) blockPair(line []byte, m map[string]any) bool {
	p.s, p.i = line, 0
	k, ok := p.key()
	if !ok {
		return false
	}
	if _, dup := m[k]; dup {
		return false
	}
	p.skipSpaces()
	if p.i == len(p.s) {
		return false // a nested block
	}
	var v any
	switch p.s[p.i] {
	case '{':
		v, ok = p.flowMapping()
	case '[':
		v, ok = p.flowSequence()
	default:
		v, ok = p.scalar(false)
	}
	if !ok || !p.atEnd() {
		return false
	}
	m[k] = v
	return true
}

// key reads a mapping key and the ": " after it.
func (p *fastParser) key() (string, bool) {
	start := p.i
	var k string
	if end := plainEnd(p.s, start); end < len(p.s) && p.s[end] == ':' && p.keys[string(p.s[start:end])] != "" {
		// This text was read as a plain key before: the same key.
		k, p.i = p.keys[string(p.s[start:end])], end
	} else {
		v, ok := p.scalar(true)
		if !ok || p.i-start > 1000 {
			return "", false // libyaml limits a simple key to 1024 characters
		}
		var isStr bool
		if k, isStr = v.(string); !isStr {
			return "", false
		}
		if q := p.s[start]; q != '"' && q != '\'' && k != "" {
			if p.keys == nil {
				p.keys = map[string]string{}
			}
			p.keys[k] = k
		}
	}
	if p.i+1 > len(p.s) || p.s[p.i] != ':' {
		return "", false
	}
	p.i++
	if p.i < len(p.s) && p.s[p.i] != ' ' {
		return "", false
	}
	return k, true
}

func (p *fastParser) flowMapping() (any, bool) {
	p.i++ // '{'
	p.skipSpaces()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return map[string]any{}, true
	}
	// The pairs wait on the parser's stack like flowSequence's values.
	base := len(p.kvs)
	for {
		p.skipSpaces()
		k, ok := p.key()
		if !ok {
			return nil, false
		}
		// A repeat is found by a scan: cheap for the few keys a service
		// or backend has, quadratic for a huge mapping, which is left to
		// go-yaml (maxPairs).
		if _, dup := pairs(p.kvs[base:]).get(k); dup || len(p.kvs)-base >= maxPairs {
			return nil, false
		}
		v, ok := p.flowValue()
		if !ok {
			return nil, false
		}
		p.kvs = append(p.kvs, pair{k, v})
		if done, ok := p.separator('}'); !ok || done {
			m := append(make(pairs, 0, len(p.kvs)-base), p.kvs[base:]...)
			clear(p.kvs[base:])
			p.kvs = p.kvs[:base]
			return m, ok
		}
	}
}

// pairs is a non-empty flow mapping as fastItems reads it: its pairs in
// order, keys unique. decodeValue, kindOf and render take it as they take
// a map[string]any: a map per mapping — 120,000 of them at 10,000
// services × 10 backends — was the largest cost of a parse (issue 18).
type pairs []pair

// maxPairs bounds a mapping fastItems reads (a service has a dozen keys).
const maxPairs = 64

type pair struct {
	k string
	v any
}

func (ps pairs) get(k string) (any, bool) {
	for i := range ps {
		if ps[i].k == k {
			return ps[i].v, true
		}
	}
	return nil, false
}

// asMap is ps as the map go-yaml would have given (its values as they
// are: a nested mapping stays pairs).
func (ps pairs) asMap() map[string]any {
	m := make(map[string]any, len(ps))
	for _, kv := range ps {
		m[kv.k] = kv.v
	}
	return m
}

// MarshalJSON renders ps as a JSON object, as the map's rendering (render).
func (ps pairs) MarshalJSON() ([]byte, error) { return json.Marshal(ps.asMap()) }

// separator reads what follows a flow collection's entry: ',' (more
// follow) or the closing bracket (done); anything else — the line's end, a
// ':' after a sequence entry (a pair in a sequence) — is not for fastItems.
func (p *fastParser) separator(closing byte) (done, ok bool) {
	p.skipSpaces()
	if p.i == len(p.s) {
		return false, false
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, true
	case closing:
		p.i++
		return true, true
	}
	return false, false
}

func (p *fastParser) flowSequence() (any, bool) {
	p.i++ // '['
	p.skipSpaces()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return []any{}, true
	}
	// The values wait on the parser's stack (a nested list's above them,
	// gone before the next is pushed) and the list is made once at its
	// size: appending to a fresh slice grew every backend list 1, 2, 4,
	// 8, 16, copying it each time.
	base := len(p.stack)
	for {
		v, ok := p.flowValue()
		if !ok {
			return nil, false
		}
		p.stack = append(p.stack, v)
		if done, ok := p.separator(']'); !ok || done {
			l := append(make([]any, 0, len(p.stack)-base), p.stack[base:]...)
			clear(p.stack[base:])
			p.stack = p.stack[:base]
			return l, ok
		}
	}
}

func (p *fastParser) flowValue() (any, bool) {
	p.skipSpaces()
	if p.i == len(p.s) {
		return nil, false
	}
	switch p.s[p.i] {
	case '{':
		return p.flowMapping()
	case '[':
		return p.flowSequence()
	}
	return p.scalar(false)
}

// scalar reads a quoted string or a plain scalar whose type is certain.
// A plain scalar ends at a space or one of ",:[]{}"; what may follow is the
// caller's to check.
func (p *fastParser) scalar(isKey bool) (any, bool) {
	if p.i == len(p.s) {
		return nil, false
	}
	if q := p.s[p.i]; q == '"' || q == '\'' {
		j := bytes.IndexByte(p.s[p.i+1:], q)
		if j < 0 {
			return nil, false
		}
		body := p.s[p.i+1 : p.i+1+j]
		// Escapes, a doubled single quote, or bytes a YAML stream may not
		// hold are go-yaml's to read.
		if q == '"' && bytes.IndexByte(body, '\\') >= 0 || !printable(body, false) {
			return nil, false
		}
		p.i += j + 2
		if p.i < len(p.s) && p.s[p.i] == q {
			return nil, false
		}
		return string(body), true
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == ' ' || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' {
			break
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '/') {
			return nil, false
		}
		p.i++
	}
	tok := p.s[start:p.i]
	if p.i < len(p.s) && p.s[p.i] == ':' && !isKey {
		return nil, false // "a:b" or a pair where a value belongs
	}
	return plainValue(tok, isKey)
}

// plainEnd is where a plain scalar starting at i would end: at a space or
// one of ",:[]{}" (scalar's rule; whether its bytes may be in a plain
// scalar at all is scalar's to check).
func plainEnd(s []byte, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', ',', ':', '[', ']', '{', '}':
			return i
		}
		i++
	}
	return i
}

// plainValue types a plain scalar as YAML 1.1 (go-yaml v2) would, or says it
// cannot be sure.
func plainValue(tok []byte, isKey bool) (any, bool) {
	if len(tok) == 0 {
		return nil, false
	}
	c := tok[0]
	switch {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		switch string(tok) {
		case "true":
			return true, !isKey
		case "false":
			return false, !isKey
		case "null":
			return nil, !isKey
		}
		if yaml11Word(tok) {
			return nil, false
		}
		return string(tok), true
	case c >= '0' && c <= '9' || c == '-':
		if isKey {
			return nil, false
		}
		if decimalInt(tok) {
			return json.Number(tok), true
		}
		if dottedNumber(tok) {
			return string(tok), true
		}
	}
	return nil, false
}

// yaml11Word: spellings of YAML 1.1's booleans and null (any case, so more
// than go-yaml's list: a false alarm only sends the chunk to go-yaml).
func yaml11Word(tok []byte) bool {
	if len(tok) > 5 {
		return false
	}
	// EqualFold, not ToLower: this runs for most keys and short values of
	// a 10,000-service file, and ToLower allocates.
	for _, w := range yaml11Words {
		if bytes.EqualFold(tok, w) {
			return true
		}
	}
	return false
}

var yaml11Words = [][]byte{[]byte("y"), []byte("n"), []byte("yes"), []byte("no"), []byte("on"), []byte("off"),
	[]byte("true"), []byte("false"), []byte("null")}

// decimalInt: -?(0|[1-9][0-9]{0,17}), never "-0" (go-yaml reads it as 0).
func decimalInt(tok []byte) bool {
	d := tok
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || d[0] == '0' && (len(d) > 1 || len(tok) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// dottedNumber: digits in three or more dot-separated groups (an IPv4
// address, a version): neither an integer nor a float nor a timestamp, so
// a string.
func dottedNumber(tok []byte) bool {
	groups := 0
	for _, g := range bytes.Split(tok, []byte(".")) {
		if len(g) == 0 {
			return false
		}
		for _, c := range g {
			if c < '0' || c > '9' {
				return false
			}
		}
		groups++
	}
	return groups >= 3
}

// printable: valid UTF-8 of printable ASCII or non-ASCII runes (what a
// quoted scalar may hold without go-yaml doing anything to it), and '\n'
// if newlines.
func printable(b []byte, newlines bool) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(newlines && c == '\n') {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		// Invalid UTF-8; a BOM; C1 controls and NEL; the line and
		// paragraph separators (line breaks to YAML 1.1); non-characters.
		if r == utf8.RuneError && n == 1 || r == 0xFEFF || r < 0xA0 || r == 0x2028 || r == 0x2029 || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += n
	}
	return true
}
