package config

import (
	"bytes"
	"runtime"
	"sync"
	"unicode/utf8"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// A large config is almost all one list: `services:`, one item per service.
// go-yaml builds a node tree of the whole document before it yields a value
// — for 10,000 services × 10 backends (5.5 MB) about 110 MB live at once,
// which made start-up's peak heap ~200 MB (and 50,000 services five times
// that) — and it parses on one core. So when the document is laid out
// plainly, decodeYAML parses the `services:` items in chunks, on every core,
// each chunk's tree garbage as soon as its values are taken, and the rest of
// the document on its own.
//
// "Plainly" is checked line by line, conservatively; anything else — tabs,
// anchors or aliases (an alias may point into another chunk), directives or
// document markers, a line at the top level that is not `key:`, a line at
// the items' indentation that does not start an item — and the document is
// parsed whole, as before. So is any document a chunk fails on: errors and
// their line numbers come from the whole parse. FuzzDecodeYAMLSameAsJSONPath
// holds both ways equal to the JSON path.

// splitMin is the size below which splitting is not worth its bookkeeping;
// splitChunk the size of text a chunk aims at.
const (
	splitMin   = 256 << 10
	splitChunk = 128 << 10
)

// splitServices returns the document with the items of its top-level
// `services:` block sequence removed (the key then holds null) and those
// items' text in up to parts chunks of whole items, each a block sequence
// of its own. ok is false when the layout is not plain enough to split.
func splitServices(data []byte, parts int) (head []byte, chunks [][]byte, ok bool) {
	if bytes.ContainsAny(data, "\t&*%") || bytes.Contains(data, []byte("\r")) {
		return nil, nil, false
	}
	type line struct{ start, end int } // [start, end) including the newline
	var lines []line
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
			return nil, nil, false
		}
		if from >= 0 && to == len(lines) && i > from {
			to = i // the next top-level key ends the block
		}
		if k, rest, _ := bytes.Cut(t, []byte(":")); string(k) == "services" {
			if from >= 0 || !blank(rest) {
				return nil, nil, false // twice, or a flow sequence
			}
			from = i
		}
	}
	if from < 0 {
		return nil, nil, false
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
			return nil, nil, false
		}
	}
	if len(starts) < 2 {
		return nil, nil, false
	}
	head = append([]byte{}, data[:lines[from].end]...)
	if to < len(lines) {
		head = append(head, data[lines[to].start:]...)
	}
	per := (len(starts) + parts - 1) / parts
	for c := 0; c < len(starts); c += per {
		end := to
		if c+per < len(starts) {
			end = starts[c+per]
		}
		last := lines[end-1].end
		chunks = append(chunks, data[lines[starts[c]].start:last])
	}
	return head, chunks, true
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

// decodeYAMLSplit is decodeYAML over splitServices' pieces; ok is false
// when the document is not split or a piece fails (the caller then parses
// it whole, for the same values or the same error).
func decodeYAMLSplit(data []byte) (v any, ok bool) {
	// go-yaml refuses a document with invalid UTF-8 anywhere, comments
	// included; the pieces' own parsers skip comments unread, so such a
	// document goes whole, for go-yaml's error (found by
	// FuzzDecodeYAMLSameAsJSONPath: a bad byte in a comment under services:).
	if !utf8.Valid(data) {
		return nil, false
	}
	workers := runtime.GOMAXPROCS(0)
	// Chunks of ~splitChunk bytes: each chunk's tree is ~20× its text, and
	// one per worker is alive at a time.
	head, chunks, ok := splitServices(data, max(2*workers, len(data)/splitChunk))
	if !ok {
		return nil, false
	}
	items := make([][]any, len(chunks))
	failed := make([]bool, len(chunks))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if fast, ok := fastItems(chunks[c]); ok {
					items[c] = fast
					continue
				}
				var seq []any
				if err := yaml.UnmarshalStrict(chunks[c], &seq); err != nil {
					failed[c] = true
					continue
				}
				out, err := jsonable(seq)
				if err != nil {
					failed[c] = true
					continue
				}
				items[c] = out.([]any)
			}
		}()
	}
	for c := range chunks {
		next <- c
	}
	close(next)
	wg.Wait()
	var doc any
	if err := yaml.UnmarshalStrict(head, &doc); err != nil {
		return nil, false
	}
	top, err := jsonable(doc)
	if err != nil {
		return nil, false
	}
	m, isMap := top.(map[string]any)
	if !isMap || m["services"] != nil {
		return nil, false
	}
	n := 0
	for c := range chunks {
		if failed[c] {
			return nil, false
		}
		n += len(items[c])
	}
	all := make([]any, 0, n)
	for _, it := range items {
		all = append(all, it...)
	}
	m["services"] = all
	return m, true
}
