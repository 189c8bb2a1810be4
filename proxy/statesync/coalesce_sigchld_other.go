//go:build !(linux && (amd64 || arm64))

package statesync

// quietChildStops: elsewhere the gate's stops still send SIGCHLD (a wake
// each, no harm); see coalesce_sigchld.go.
func quietChildStops() {}
