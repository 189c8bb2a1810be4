package config

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// A large config is almost all one list: `services:`, one item per service.
// go-yaml builds a node tree of the whole document before it yields a value
// — for 10,000 services × 10 backends (5.5 MB) about 110 MB live at once,
// which made start-up's peak heap ~200 MB (and 50,000 services five times
// that) — and it parses on one core. So when the document is laid out
// plainly, parse reads the `services:` items in chunks, on every core, and
// decodes and converts each chunk's services as soon as it is read
// (parse_split.go): a chunk's tree and generic values are garbage before
// the next chunk is read, and the rest of the document is parsed on its own.
//
// "Plainly" is checked line by line, conservatively; anything else — tabs,
// anchors or aliases (an alias may point into another chunk), directives or
// document markers, a line at the top level that is not `key:`, a line at
// the items' indentation that does not start an item — and the document is
// parsed whole, as before. So is any document a chunk fails on: errors and
// their line numbers come from the whole parse. FuzzDecodeYAMLSameAsJSONPath
// holds the split values equal to the JSON path's, FuzzParseSplitSameAsWhole
// the split parse's Config and errors equal to the whole parse's.

// splitMin is the size below which splitting is not worth its bookkeeping;
// splitChunk the size of text a chunk aims at.
const (
	splitMin   = 256 << 10
	splitChunk = 128 << 10
)

// splitServices returns the document with the items of its top-level
// `services:` block sequence removed (the key then holds null) and those
// items' text in up to parts chunks of whole items, each a block sequence
// of its own, per items each (the last may hold fewer). ok is false when the
// layout is not plain enough to split.
func splitServices(data []byte, parts int) (head []byte, chunks [][]byte, per int, ok bool) {
	if bytes.ContainsAny(data, "\t&*%") || bytes.Contains(data, []byte("\r")) {
		return nil, nil, 0, false
	}
	type line struct{ start, end int } // [start, end) including the newline
	lines := make([]line, 0, bytes.Count(data, []byte("\n"))+1)
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			lines = append(lines, line{i, len(data)})
			break
		}
		lines = append(lines, line{i, i + j + 1})
		i += j + 1
	}
	text := func(l line) []byte { return bytes.TrimRight(data[l.start:l.end], "\n") }
	blank := func(t []byte) bool {
		t = bytes.TrimLeft(t, " ")
		return len(t) == 0 || t[0] == '#'
	}
	indent := func(t []byte) int { return len(t) - len(bytes.TrimLeft(t, " ")) }

	// Every top-level line is a plain `key:`; the services block starts
	// right after `services:` with nothing but a comment after the colon.
	from, to := -1, len(lines)
	for i, l := range lines {
		t := text(l)
		if blank(t) || t[0] == ' ' || (from >= 0 && i > from && to == len(lines) && t[0] == '-') {
			continue
		}
		if !topKey(t) {
			return nil, nil, 0, false
		}
		if from >= 0 && to == len(lines) && i > from {
			to = i // the next top-level key ends the block
		}
		if k, rest, _ := bytes.Cut(t, []byte(":")); string(k) == "services" {
			if from >= 0 || !blank(rest) {
				return nil, nil, 0, false // twice, or a flow sequence
			}
			from = i
		}
	}
	if from < 0 {
		return nil, nil, 0, false
	}
	// The items: each starts at one indentation with "- "; every other
	// non-blank line of the block is deeper.
	var starts []int
	k := -1
	for i := from + 1; i < to; i++ {
		t := text(lines[i])
		if blank(t) {
			continue
		}
		n := indent(t)
		if k < 0 {
			k = n
		}
		switch {
		case n == k && (bytes.HasPrefix(t[n:], []byte("- ")) || len(t) == n+1 && t[n] == '-'):
			starts = append(starts, i)
		case n > k && len(starts) > 0:
		default:
			return nil, nil, 0, false
		}
	}
	if len(starts) < 2 {
		return nil, nil, 0, false
	}
	head = append([]byte{}, data[:lines[from].end]...)
	if to < len(lines) {
		head = append(head, data[lines[to].start:]...)
	}
	per = (len(starts) + parts - 1) / parts
	for c := 0; c < len(starts); c += per {
		end := to
		if c+per < len(starts) {
			end = starts[c+per]
		}
		last := lines[end-1].end
		chunks = append(chunks, data[lines[starts[c]].start:last])
	}
	return head, chunks, per, true
}

// topKey reports whether a top-level line is `key:` with a plain key
// (letters, digits, '_' or '-'), a space or nothing after the colon.
func topKey(t []byte) bool {
	k, rest, found := bytes.Cut(t, []byte(":"))
	if !found || len(k) == 0 || len(rest) > 0 && rest[0] != ' ' {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// splitDoc is a document splitServices took apart, its head already
// parsed: the services' items wait in chunks of text.
type splitDoc struct {
	head   map[string]any // the document with `services:` emptied (null)
	chunks [][]byte
	first  []int // the index among services: of each chunk's first item
}

// splitYAML splits a plainly laid out document and parses its head; ok is
// false when it is not split or the head fails (the caller then parses the
// document whole, for the same values or the same error).
func splitYAML(data []byte) (d splitDoc, ok bool) {
	// go-yaml refuses a document with invalid UTF-8 anywhere, comments
	// included; the pieces' own parsers skip comments unread, so such a
	// document goes whole, for go-yaml's error (found by
	// FuzzDecodeYAMLSameAsJSONPath: a bad byte in a comment under services:).
	if !utf8.Valid(data) {
		return d, false
	}
	// Chunks of ~splitChunk bytes: each chunk's tree is ~20× its text, and
	// one per worker is alive at a time.
	head, chunks, per, ok := splitServices(data, max(2*runtime.GOMAXPROCS(0), len(data)/splitChunk))
	if !ok {
		return d, false
	}
	var doc any
	if err := yaml.UnmarshalStrict(head, &doc); err != nil {
		return d, false
	}
	top, err := jsonable(doc)
	if err != nil {
		return d, false
	}
	// The head must hold `services:` itself, empty: go-yaml v2 ignores
	// what follows some malformed first lines (" {}\nservices: ..." reads
	// as {}), and a head without the key would have had the items added to
	// a document that, whole, has no services at all (found by
	// FuzzParseSplitSameAsWhole).
	m, isMap := top.(map[string]any)
	if v, has := m["services"]; !isMap || !has || v != nil {
		return d, false
	}
	d = splitDoc{head: m, chunks: chunks, first: make([]int, len(chunks))}
	for c := range chunks {
		d.first[c] = c * per
	}
	return d, true
}

// items parses the chunks on every core and hands each chunk's items to
// use (called concurrently, once per chunk) as soon as they are read, so
// a chunk's values can be garbage before the next is parsed. It returns
// false when a chunk fails, after the other chunks were handed over: the
// caller then drops what it built and parses the document whole.
func (d splitDoc) items(use func(chunk int, items []any)) bool {
	var wg sync.WaitGroup
	var failed atomic.Bool
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if failed.Load() {
					continue // the whole parse will do it all again
				}
				items, ok := chunkItems(d.chunks[c])
				if !ok {
					failed.Store(true)
					continue
				}
				use(c, items)
			}
		}()
	}
	for c := range d.chunks {
		next <- c
	}
	close(next)
	wg.Wait()
	return !failed.Load()
}

// chunkItems reads one chunk: fastItems when it can, go-yaml otherwise.
func chunkItems(chunk []byte) ([]any, bool) {
	if fast, ok := fastItems(chunk); ok {
		return fast, true
	}
	var seq []any
	if err := yaml.UnmarshalStrict(chunk, &seq); err != nil {
		return nil, false
	}
	out, err := jsonable(seq)
	if err != nil {
		return nil, false
	}
	return out.([]any), true
}
