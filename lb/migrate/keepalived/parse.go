// Package keepalived reads keepalived.conf (virtual_server, real_server,
// checkers, virtual_server_group, vrrp_instance VIPs) and converts the
// LVS part into an edgelb config, reporting what has no equivalent.
package keepalived

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSyntax is wrapped by every parse error (with the line number).
var ErrSyntax = errors.New("keepalived.conf syntax")

// Node is one statement: a keyword, its arguments on the same line and,
// when followed by a { } block, its children.
type Node struct {
	Name     string
	Args     []string
	Children []*Node
	Block    bool // had a { } block (possibly empty)
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
}

// lex splits the text into tokens. keepalived's rules: '#' and '!' start a
// comment to the end of the line; '{' and '}' are tokens even when glued to
// a word; double quotes group a string; a newline ends a statement.
func lex(src string) ([]token, error) {
	var toks []token
	line := 1
	i := 0
	for i < len(src) {
		ch := src[i]
		switch {
		case ch == '\n':
			toks = append(toks, token{text: "\n", line: line})
			line++
			i++
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '#' || ch == '!':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case ch == '{' || ch == '}':
			toks = append(toks, token{text: string(ch), line: line})
			i++
		case ch == '"':
			j := strings.IndexAny(src[i+1:], "\"\n")
			if j < 0 || src[i+1+j] != '"' {
				return nil, fmt.Errorf("%w: line %d: unterminated quoted string", ErrSyntax, line)
			}
			toks = append(toks, token{text: src[i+1 : i+1+j], line: line, quoted: true})
			i += j + 2
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n{}#!\"", rune(src[j])) {
				j++
			}
			toks = append(toks, token{text: src[i:j], line: line})
			i = j
		}
	}
	return toks, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 32

// Parse reads keepalived.conf text into statements. include lines are kept
// as nodes named "include" (the converter reports them: the files they
// name are not read, so nothing is pulled in behind the user's back).
func Parse(src string) ([]*Node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	nodes, err := p.block(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("%w: line %d: unexpected '}'", ErrSyntax, p.toks[p.pos].line)
	}
	return nodes, nil
}

type parser struct {
	toks []token
	pos  int
}

func (p *parser) block(depth int) ([]*Node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: line %d: blocks nested deeper than %d", ErrSyntax, p.line(), maxDepth)
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
				return nil, fmt.Errorf("%w: line %d: '{' without a keyword", ErrSyntax, t.line)
			}
			if err := p.body(out[len(out)-1], depth); err != nil {
				return nil, err
			}
		default:
			n := &Node{Name: t.text, Line: t.line}
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
		return fmt.Errorf("%w: line %d: %s has two blocks", ErrSyntax, p.line(), n.Name)
	}
	open := p.line()
	p.pos++ // {
	kids, err := p.block(depth + 1)
	if err != nil {
		return err
	}
	if p.pos >= len(p.toks) {
		return fmt.Errorf("%w: line %d: block of %s not closed", ErrSyntax, open, n.Name)
	}
	p.pos++ // }
	n.Children, n.Block = kids, true
	return nil
}

func (p *parser) line() int {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].line
	}
	if len(p.toks) > 0 {
		return p.toks[len(p.toks)-1].line
	}
	return 1
}
