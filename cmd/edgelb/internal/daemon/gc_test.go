package daemon

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestSteadyGC: without GOGC the ready daemon collects at 1.5× the live
// heap; an operator's GOGC is left as the runtime read it.
func TestSteadyGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	debug.SetGCPercent(80) // as if the runtime had read GOGC=80
	if got := steadyGC(); got != 80 {
		t.Fatalf("GOGC set: steadyGC() = %d, want the operator's 80", got)
	}
	if got := debug.SetGCPercent(80); got != 80 {
		t.Fatalf("GOGC set: percent now %d, want 80 left alone", got)
	}
	os.Unsetenv("GOGC") // t.Setenv above restores it
	debug.SetGCPercent(100)
	if got := steadyGC(); got != steadyGCPercent {
		t.Fatalf("GOGC unset: steadyGC() = %d, want %d", got, steadyGCPercent)
	}
	if got := debug.SetGCPercent(100); got != steadyGCPercent {
		t.Fatalf("GOGC unset: percent now %d, want %d", got, steadyGCPercent)
	}
}
