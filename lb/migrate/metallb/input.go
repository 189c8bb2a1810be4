package metallb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// ErrInput is wrapped by every error about the input documents.
var ErrInput = errors.New("metallb input")

// ErrUnknown is wrapped (with ErrInput) when a document is not MetalLB
// configuration or does not parse and the caller did not ask to skip such
// documents.
var ErrUnknown = errors.New("not MetalLB configuration (give --skip-unknown to skip it)")

// Object is one MetalLB object as read: its kind, name and the fields not
// yet converted. Fields are removed as they are used (take).
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// Labels are metadata.labels (IPAddressPools are selected by them).
	Labels map[string]string
	// Source names where it came from: FILE:LINE (the line the object
	// starts on), or cluster.
	Source string
	Spec   map[string]any
}

// Ref is "Kind/name" as reports write it.
func (o *Object) Ref() string { return o.Kind + "/" + o.Name }

// ReadDocuments splits multi-document YAML (or JSON) and keeps the
// metallb.io objects, and the objects of a pre-0.13 MetalLB ConfigMap
// (legacy.go). A document that is neither, or does not parse, is an error
// wrapping ErrUnknown — unless skipUnknown, when it is listed in skipped
// so the report names it. A List (kubectl get -o yaml) is unwrapped.
func ReadDocuments(r io.Reader, source string, skipUnknown bool) (objs []*Object, skipped []string, err error) {
	docs, err := splitYAML(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInput, source, err)
	}
	for _, d := range docs {
		at := fmt.Sprintf("%s:%d", source, d.line)
		var m map[string]any
		if err := yaml.Unmarshal(d.text, &m); err != nil {
			if !skipUnknown {
				return nil, nil, fmt.Errorf("%w: %s: does not parse (%v): %w", ErrInput, at, err, ErrUnknown)
			}
			skipped = append(skipped, fmt.Sprintf("%s: does not parse: %v", at, err))
			continue
		}
		if m == nil {
			continue
		}
		lines := nodeLinesOf(d.text)
		items := []map[string]any{m}
		itemLine := []int{d.line}
		cfgLine := []int{d.start + lines.config(-1) - 1}
		if k, _ := m["kind"].(string); strings.HasSuffix(k, "List") {
			items, itemLine, cfgLine = items[:0], itemLine[:0], cfgLine[:0]
			list, _ := m["items"].([]any)
			for j, it := range list {
				if im, ok := it.(map[string]any); ok {
					items = append(items, im)
					itemLine = append(itemLine, d.start+lines.item(j)-1)
					cfgLine = append(cfgLine, d.start+lines.config(j)-1)
				}
			}
		}
		for j, it := range items {
			src := fmt.Sprintf("%s:%d", source, itemLine[j])
			if cm, ok := legacyConfig(it); ok {
				o, err := readLegacy(cm, src, source, cfgLine[j])
				if err != nil {
					return nil, nil, err
				}
				objs = append(objs, o...)
				continue
			}
			o, err := objectOf(it, src)
			if err != nil {
				return nil, nil, err
			}
			if o == nil {
				k, _ := it["kind"].(string)
				av, _ := it["apiVersion"].(string)
				if !skipUnknown {
					return nil, nil, fmt.Errorf("%w: %s: %s %s: %w", ErrInput, src, av, k, ErrUnknown)
				}
				skipped = append(skipped, fmt.Sprintf("%s: %s %s (not MetalLB configuration)", src, av, k))
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs, skipped, nil
}

func objectOf(m map[string]any, src string) (*Object, error) {
	av, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	group, version, _ := strings.Cut(av, "/")
	if group != "metallb.io" {
		return nil, nil
	}
	if version != "v1beta1" && version != "v1beta2" {
		return nil, fmt.Errorf("%w: %s: apiVersion %q: want metallb.io/v1beta1 or v1beta2", ErrInput, src, av)
	}
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if name == "" {
		return nil, fmt.Errorf("%w: %s: %s without metadata.name", ErrInput, src, kind)
	}
	spec, _ := m["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	o := &Object{APIVersion: av, Kind: kind, Name: name, Namespace: ns, Source: src, Spec: spec}
	if ls, ok := md["labels"].(map[string]any); ok {
		o.Labels = map[string]string{}
		for k, v := range ls {
			o.Labels[k] = fmt.Sprint(v)
		}
	}
	return o, nil
}

// document is one YAML document: its text's first line is the file's
// line start; the object starts on line (comments and blank lines before).
type document struct {
	text        []byte
	start, line int
}

func splitYAML(r io.Reader) ([]document, error) {
	var docs []document
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	n, start := 0, 1
	flush := func(next int) {
		if t := cur.Bytes(); len(bytes.TrimSpace(t)) > 0 {
			// The line of the first non-blank, non-comment line: where the object starts.
			first := start
			for _, l := range strings.Split(string(t), "\n") {
				if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
					break
				}
				first++
			}
			docs = append(docs, document{text: append([]byte(nil), t...), start: start, line: first})
		}
		cur.Reset()
		start = next
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" || strings.HasPrefix(line, "--- ") {
			flush(n + 1)
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush(n + 1)
	return docs, nil
}

// take removes key from m and returns it.
func take(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	delete(m, key)
	return v, ok
}

func takeString(m map[string]any, key string) string {
	v, _ := take(m, key)
	s, _ := v.(string)
	return s
}

func takeBool(m map[string]any, key string) (bool, bool) {
	v, ok := take(m, key)
	b, isB := v.(bool)
	return b, ok && isB
}

// takeInt reads a number: float64 from YAML files, int64 from a live
// cluster's unstructured objects.
func takeInt(m map[string]any, key string) (int64, bool) {
	v, ok := take(m, key)
	switch n := v.(type) {
	case float64:
		return int64(n), ok
	case int64:
		return n, ok
	case int:
		return int64(n), ok
	}
	return 0, false
}

func takeStrings(m map[string]any, key string) []string {
	v, _ := take(m, key)
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// leftovers lists the dotted paths of every field still in m.
func leftovers(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		p := prefix + "." + k
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leftovers(p, sub)...)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
