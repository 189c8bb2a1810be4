// Package keepalived reads keepalived.conf (virtual_server, real_server,
// checkers, virtual_server_group, vrrp_instance VIPs) and converts the
// LVS part into an edgelb config, reporting what has no equivalent.
package keepalived

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ErrSyntax is wrapped by every error about the text's form (a block not
// closed, an unterminated string, an include that cannot be read);
// ErrValue by every error about a value (an address, a port, a method).
// Both come inside an *Error naming the file and line.
var (
	ErrSyntax  = errors.New("syntax")
	ErrValue   = errors.New("bad value")
	ErrUnknown = errors.New("unknown keyword")
)

// Error is one refusal: where, and what failed.
type Error struct {
	File string
	Line int
	What string
	Kind error // ErrSyntax, ErrValue or ErrUnknown
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.What) }
func (e *Error) Unwrap() error { return e.Kind }

// Node is one statement: a keyword, its arguments on the same line and,
// when followed by a { } block, its children.
type Node struct {
	Name     string
	Args     []string
	Children []*Node
	Block    bool // had a { } block (possibly empty)
	// Included: for an include line read by ParseFile, the files it read
	// (empty: it matched none); nil when includes were not followed.
	Included []string
	File     string
	Line     int
}

// Child returns the first child named name, or nil.
func (n *Node) Child(name string) *Node {
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

type token struct {
	text   string
	line   int
	quoted bool
	file   string
}

// lex splits the text into tokens. keepalived's rules: '#' and '!' start a
// comment to the end of the line; '{' and '}' are tokens even when glued to
// a word; double quotes group a string; a newline ends a statement.
func lex(file, src string) ([]token, error) {
	var toks []token
	line := 1
	i := 0
	for i < len(src) {
		ch := src[i]
		switch {
		case ch == '\n':
			toks = append(toks, token{text: "\n", line: line, file: file})
			line++
			i++
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '#' || ch == '!':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case ch == '{' || ch == '}':
			toks = append(toks, token{text: string(ch), line: line, file: file})
			i++
		case ch == '"':
			j := strings.IndexAny(src[i+1:], "\"\n")
			if j < 0 || src[i+1+j] != '"' {
				return nil, &Error{file, line, "unterminated quoted string", ErrSyntax}
			}
			toks = append(toks, token{text: src[i+1 : i+1+j], line: line, quoted: true, file: file})
			i += j + 2
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n{}#!\"", rune(src[j])) {
				j++
			}
			toks = append(toks, token{text: src[i:j], line: line, file: file})
			i = j
		}
	}
	return toks, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack;
// maxIncludeDepth bounds include chains (keepalived's own limit is 8 too).
const (
	maxDepth        = 32
	maxIncludeDepth = 8
)

// Parse reads keepalived.conf text (named keepalived.conf in findings)
// into statements. include lines are kept as nodes and not followed: the
// text has no directory to resolve them against (ParseFile follows them).
func Parse(src string) ([]*Node, error) { return ParseText("keepalived.conf", src) }

// ParseText is Parse with the name findings and errors give the text.
func ParseText(name, src string) ([]*Node, error) {
	toks, err := lex(name, src)
	if err != nil {
		return nil, err
	}
	return parseTokens(toks, nil)
}

// ParseFile reads a keepalived.conf and every file its include lines name,
// as keepalived does: a relative name is relative to the directory of the
// file holding the include, and it may be a glob; the included text takes
// the include's place. Each node keeps its own file and line.
func ParseFile(path string) ([]*Node, error) {
	inc := &includer{matched: map[string][]string{}}
	toks, err := inc.read(path, nil)
	if err != nil {
		return nil, err
	}
	return parseTokens(toks, inc.matched)
}

type includer struct {
	matched map[string][]string // "file:line" of an include → the files it read
}

func (in *includer) read(path string, chain []string) ([]token, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	toks, err := lex(path, string(src))
	if err != nil {
		return nil, err
	}
	var out []token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		atLineStart := i == 0 || toks[i-1].text == "\n"
		if !atLineStart || t.quoted || !isInclude(t.text) {
			out = append(out, t)
			continue
		}
		// The include line itself stays (the converter reports what it
		// read); the files it names follow it.
		j := i
		var args []string
		for ; j < len(toks) && toks[j].text != "\n"; j++ {
			out = append(out, toks[j])
			if j > i {
				args = append(args, toks[j].text)
			}
		}
		if j < len(toks) {
			out = append(out, toks[j])
		}
		i = j
		if len(args) != 1 {
			return nil, &Error{path, t.line, fmt.Sprintf("%s wants one file name or pattern, got %d", t.text, len(args)), ErrSyntax}
		}
		if len(chain) >= maxIncludeDepth {
			return nil, &Error{path, t.line, fmt.Sprintf("%s %q: includes nested deeper than %d", t.text, args[0], maxIncludeDepth), ErrSyntax}
		}
		pattern := args[0]
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(filepath.Dir(path), pattern)
		}
		files, err := filepath.Glob(pattern)
		if err != nil {
			return nil, &Error{path, t.line, fmt.Sprintf("%s %q: %v", t.text, args[0], err), ErrSyntax}
		}
		sort.Strings(files)
		key := fmt.Sprintf("%s:%d", path, t.line)
		in.matched[key] = []string{}
		for _, f := range files {
			if slices.Contains(chain, f) || f == path {
				return nil, &Error{path, t.line, fmt.Sprintf("%s %q: %s includes itself", t.text, args[0], f), ErrSyntax}
			}
			sub, err := in.read(f, append(chain, path))
			if err != nil {
				var e *Error
				if errors.As(err, &e) {
					return nil, err
				}
				return nil, &Error{path, t.line, fmt.Sprintf("%s %q: %v", t.text, args[0], err), ErrSyntax}
			}
			in.matched[key] = append(in.matched[key], f)
			out = append(out, sub...)
			out = append(out, token{text: "\n", line: t.line, file: path})
		}
	}
	return out, nil
}

// isInclude: include and keepalived's checking variants.
func isInclude(s string) bool {
	switch s {
	case "include", "includer", "includem", "includew", "includeb", "includea":
		return true
	}
	return false
}

func parseTokens(toks []token, matched map[string][]string) ([]*Node, error) {
	p := &parser{toks: toks}
	nodes, err := p.block(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		t := p.toks[p.pos]
		return nil, &Error{t.file, t.line, "unexpected '}' (no block is open)", ErrSyntax}
	}
	if matched != nil {
		walk(nodes, func(n *Node) {
			if isInclude(n.Name) {
				n.Included = matched[fmt.Sprintf("%s:%d", n.File, n.Line)]
				if n.Included == nil {
					n.Included = []string{}
				}
			}
		})
	}
	return nodes, nil
}

func walk(nodes []*Node, f func(*Node)) {
	for _, n := range nodes {
		f(n)
		walk(n.Children, f)
	}
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) block(depth int) ([]*Node, error) {
	if depth > maxDepth {
		t := p.tok()
		return nil, &Error{t.file, t.line, fmt.Sprintf("blocks nested deeper than %d", maxDepth), ErrSyntax}
	}
	var out []*Node
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		switch {
		case t.text == "\n":
			p.pos++
		case t.text == "}" && !t.quoted:
			return out, nil
		case t.text == "{" && !t.quoted:
			// A block without a keyword: keepalived's grouped lists
			// (virtual_ipaddress { ... } on its own line after the keyword).
			if len(out) == 0 {
				return nil, &Error{t.file, t.line, "'{' without a keyword before it", ErrSyntax}
			}
			if err := p.body(out[len(out)-1], depth); err != nil {
				return nil, err
			}
		default:
			n := &Node{Name: t.text, File: t.file, Line: t.line}
			p.pos++
			for p.pos < len(p.toks) {
				a := p.toks[p.pos]
				if a.text == "\n" || (!a.quoted && (a.text == "{" || a.text == "}")) {
					break
				}
				n.Args = append(n.Args, a.text)
				p.pos++
			}
			out = append(out, n)
			if p.pos < len(p.toks) && p.toks[p.pos].text == "{" && !p.toks[p.pos].quoted {
				if err := p.body(n, depth); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// body reads "{ ... }" into n's children.
func (p *parser) body(n *Node, depth int) error {
	if n.Block {
		t := p.tok()
		return &Error{t.file, t.line, fmt.Sprintf("%s (line %d) has two blocks", n.Name, n.Line), ErrSyntax}
	}
	p.pos++ // {
	kids, err := p.block(depth + 1)
	if err != nil {
		return err
	}
	if p.pos >= len(p.toks) {
		return &Error{n.File, n.Line, fmt.Sprintf("the block of %s is not closed", n.Name), ErrSyntax}
	}
	p.pos++ // }
	n.Children, n.Block = kids, true
	return nil
}

// tok is the current token, or the last one at the end.
func (p *parser) tok() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	if len(p.toks) > 0 {
		return p.toks[len(p.toks)-1]
	}
	return token{line: 1}
}
