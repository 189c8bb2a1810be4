package main

import (
	"context"
	"io"
	"net/http"
	"strings"
)

// readyWarnings reads /readyz and returns its "warning: ..." lines — the
// daemon's trouble that does not stop forwarding, such as a state store
// whose last commit failed (a full disk: writes answer 507). `edgelb
// status` prints them under its table. An unreachable /readyz gives none:
// the table's own requests already said whether the API answers.
func readyWarnings(ctx context.Context, c *apiClient) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("/readyz").String(), nil)
	if err != nil {
		return nil
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "warning: ") {
			out = append(out, l)
		}
	}
	if resp.StatusCode != http.StatusOK {
		out = append(out, "warning: not ready: "+strings.TrimSpace(string(b)))
	}
	return out
}
