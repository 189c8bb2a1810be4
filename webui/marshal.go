package webui

import "github.com/go-json-experiment/json"

// marshal renders a response body: nil slices as [], deterministic order.
func marshal(v any) ([]byte, error) {
	return json.Marshal(v, json.Deterministic(true))
}
