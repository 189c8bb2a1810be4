package webui

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/edgelb/edgelb/lb"
)

// decodeStrict decodes one JSON value into v and nothing else: unknown
// members, duplicate names, wrong types, invalid UTF-8 and trailing data are
// all refused. Errors are *lb.FieldError naming the JSON path (ports[0].port)
// so the page can show them beside the right field.
func decodeStrict(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return &lb.FieldError{Field: "body", Err: errors.New("request body is empty; want a JSON object")}
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.As(err, &syn):
		return &lb.FieldError{Field: fieldOr(pointerToField(syn.JSONPointer), "body"),
			Err: fmt.Errorf("malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)}
	case errors.As(err, &sem):
		field := pointerToField(sem.JSONPointer)
		if errors.Is(sem.Err, json.ErrUnknownName) {
			return &lb.FieldError{Field: field, Err: errors.New("unknown field")}
		}
		val := string(sem.JSONValue)
		if len(val) > 80 {
			val = val[:80] + "…"
		}
		msg := "wrong type"
		if sem.GoType != nil {
			msg = "want " + jsonKindOf(sem.GoType)
			if sem.JSONKind != 0 {
				msg += ", got " + jsonKindName(sem.JSONKind)
			}
		}
		if sem.Err != nil {
			msg += ": " + sem.Err.Error()
		}
		return &lb.FieldError{Field: fieldOr(field, "body"), Value: strings.Trim(val, `"`), Err: errors.New(msg)}
	}
	return &lb.FieldError{Field: "body", Err: fmt.Errorf("invalid JSON: %w", err)}
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

// marshal renders a response body: nil slices as [], deterministic order.
func marshal(v any) ([]byte, error) {
	return json.Marshal(v, json.Deterministic(true))
}
