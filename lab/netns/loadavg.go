package netns

import (
	"os"
	"strings"
)

// Loadavg is the machine's 1/5/15-minute load average ("?" if unreadable).
// Tests print it beside their timings: on a shared 2-core machine a number
// means little without it.
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
