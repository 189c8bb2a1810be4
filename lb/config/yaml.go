package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// decodeYAML parses a config document into generic values — map[string]any,
// []any, string, json.Number, bool, nil — the input of decodeValue.
//
// It gives exactly what sigs.k8s.io/yaml's YAMLToJSONStrict followed by a
// json.Decoder with UseNumber gave (the same go-yaml v2 parser, so YAML 1.1:
// `on`/`yes` are booleans, `0x1F` is 31; duplicate keys refused) without
// rendering the document to JSON and parsing it again: that round trip was
// 40 % of loading 10,000 services (FuzzDecodeYAMLSameAsJSONPath holds the
// two paths equal).
//
// It parses the document in one piece; parse reads a large, plainly laid
// out one in chunks instead (yaml_split.go, parse_split.go).
func decodeYAML(data []byte) (any, error) {
	var doc any
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, err
	}
	return jsonable(doc)
}

// jsonable converts go-yaml v2's values to what encoding/json would decode
// from their JSON rendering.
func jsonable(v any) (any, error) {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks, err := keyString(k)
			if err != nil {
				return nil, err
			}
			if m[ks], err = jsonable(e); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			var err error
			if l[i], err = jsonable(e); err != nil {
				return nil, err
			}
		}
		return l, nil
	case string:
		return validUTF8(x), nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(x, 'g', -1, 64))
		}
		b, err := json.Marshal(x) // encoding/json's own float format
		return json.Number(b), err
	case bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

// keyString renders a mapping key as sigs.k8s.io/yaml does.
func keyString(k any) (string, error) {
	switch x := k.(type) {
	case string:
		return validUTF8(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		switch s := strconv.FormatFloat(x, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", nil
		case "-Inf":
			return "-.inf", nil
		case "NaN":
			return ".nan", nil
		default:
			return s, nil
		}
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("unsupported map key of type: %T, key: %+#v", k, k)
}

// validUTF8 replaces each invalid byte with U+FFFD, as a JSON round trip
// does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
