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

// Object is one MetalLB object as read: its kind, name and the fields not
// yet converted. Fields are removed as they are used (take).
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// Source names where it came from (file:document or cluster).
	Source string
	Spec   map[string]any
}

// Ref is "Kind/name" as reports write it.
func (o *Object) Ref() string { return o.Kind + "/" + o.Name }

// ReadDocuments splits multi-document YAML (or JSON) and keeps the
// metallb.io objects; other kinds (Namespaces, Secrets, ...) are listed in
// skipped so the report can say they were not MetalLB configuration.
// A List (kubectl get -o yaml) is unwrapped.
func ReadDocuments(r io.Reader, source string) (objs []*Object, skipped []string, err error) {
	docs, err := splitYAML(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInput, source, err)
	}
	for i, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: document %d: %w", ErrInput, source, i+1, err)
		}
		if m == nil {
			continue
		}
		items := []map[string]any{m}
		if k, _ := m["kind"].(string); strings.HasSuffix(k, "List") {
			items = items[:0]
			list, _ := m["items"].([]any)
			for _, it := range list {
				if im, ok := it.(map[string]any); ok {
					items = append(items, im)
				}
			}
		}
		for j, it := range items {
			src := fmt.Sprintf("%s:%d", source, i+1)
			if len(items) > 1 {
				src = fmt.Sprintf("%s:%d[%d]", source, i+1, j)
			}
			o, err := objectOf(it, src)
			if err != nil {
				return nil, nil, err
			}
			if o == nil {
				k, _ := it["kind"].(string)
				av, _ := it["apiVersion"].(string)
				skipped = append(skipped, fmt.Sprintf("%s: %s %s (not MetalLB configuration)", src, av, k))
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs, skipped, nil
}

// ObjectOf reads one object given as a generic map (from a live cluster).
func ObjectOf(m map[string]any, source string) (*Object, error) { return objectOf(m, source) }

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
	return &Object{APIVersion: av, Kind: kind, Name: name, Namespace: ns, Source: src, Spec: spec}, nil
}

func splitYAML(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" || strings.HasPrefix(line, "--- ") {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
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
