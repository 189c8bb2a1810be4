package lb

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DecodeStrict decodes one JSON value into v and nothing else: unknown
// members, duplicate names, wrong types, invalid UTF-8 and trailing data are
// all refused. Errors are *FieldError naming the JSON path (ports[0].port)
// so the page can show them beside the right field.
func DecodeStrict(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return &FieldError{Field: "body", Err: errors.New("request body is empty; want a JSON object")}
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.As(err, &syn):
		return &FieldError{Field: fieldOr(pointerToField(syn.JSONPointer), "body"),
			Err: fmt.Errorf("malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)}
	case errors.As(err, &sem):
		field := pointerToField(sem.JSONPointer)
		if errors.Is(sem.Err, json.ErrUnknownName) {
			return &FieldError{Field: field, Err: errors.New("unknown field" + suggest(lastName(sem.JSONPointer), sem.GoType))}
		}
		val := string(sem.JSONValue)
		if val == "" {
			val = valueAt(body, sem.JSONPointer)
		}
		if len(val) > 80 {
			val = val[:80] + "…"
		}
		msg := "wrong type"
		if sem.GoType != nil {
			msg = "want " + jsonKindOf(sem.GoType)
			if sem.JSONKind != 0 {
				msg += ", got " + jsonKindName(sem.JSONKind)
				if sem.JSONKind == '0' && sem.GoType.Kind() == reflect.String {
					msg += " (quote the value)"
				}
			}
		}
		if sem.Err != nil {
			msg += ": " + sem.Err.Error()
		}
		return &FieldError{Field: fieldOr(field, "body"), Value: strings.Trim(val, `"`), Err: errors.New(msg)}
	}
	return &FieldError{Field: "body", Err: fmt.Errorf("invalid JSON: %w", err)}
}

// valueAt renders the scalar at pointer p in the document, for the error
// message ("" for an object or an array, or when it cannot be found).
func valueAt(body []byte, p jsontext.Pointer) string {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for tok := range p.Tokens() {
		switch x := doc.(type) {
		case map[string]any:
			doc = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return ""
			}
			doc = x[i]
		default:
			return ""
		}
	}
	switch x := doc.(type) {
	case string:
		return x
	case float64, bool:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return ""
}

func fieldOr(f, def string) string {
	if f == "" {
		return def
	}
	return f
}

// pointerToField renders a JSON pointer (/ports/0/port) the way our error
// messages and the page name fields (ports[0].port).
func pointerToField(p jsontext.Pointer) string {
	s := string(p)
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(s, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if tok == "" {
			tok = `""` // a member with an empty name: still name it
		}
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func jsonKindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

func jsonKindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return k.String()
}

// lastName is the last member name of a JSON pointer.
func lastName(p jsontext.Pointer) string {
	s := string(p)
	s = s[strings.LastIndexByte(s, '/')+1:]
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// suggest names the known field of t closest to the unknown k.
func suggest(k string, t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if strings.EqualFold(n, k) {
			return fmt.Sprintf(" (did you mean %q?)", n)
		}
		if d := distance(strings.ToLower(k), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
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
