package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/edgelb/edgelb/proxy/ipvs"
	"github.com/edgelb/edgelb/proxy/nft"
)

// ErrStateGone: the state file is missing or empty while the kernel holds
// edgelb's tables — edgelb ran here, and what it had assigned is lost.
var ErrStateGone = errors.New("state file gone while edgelb's kernel state remains")

// KernelState lists edgelb's tables in this network namespace (`edgelb
// check` asks too).
func KernelState() ([]string, error) { return nft.Present(0, nft.DefaultTable, ipvs.TableName) }

// kernelState is KernelState; a test replaces it.
var kernelState = KernelState

// checkFreshStore refuses to take a missing or empty state file for a first
// start when edgelb's tables are in the kernel: bbolt would create an empty
// store, edgelb would forget every REST-created service and assignment, and
// the addresses they hold would be free for anyone (issue 13: 142 services
// and 92 pools vanished that way, without a word). With no tables it is a
// first start (or one after a clean withdraw), said once, loudly.
func checkFreshStore(path string, log *slog.Logger) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("state file %s: %w", path, err)
	case st.Size() > 0:
		return nil // bbolt and the store's own checks take it from here
	}
	what := "missing"
	if err == nil {
		what = "empty (0 bytes)"
	}
	tables, kerr := kernelState()
	if kerr != nil {
		return fmt.Errorf("state file %s is %s, and the kernel cannot be asked whether edgelb ran here before: %v", path, what, kerr)
	}
	if len(tables) > 0 {
		return fmt.Errorf("state file %s is %s, but this gateway's kernel holds edgelb's state (%v): edgelb ran here and what it assigned is lost; "+
			"starting empty could give addresses in use to other services. Restore the state file from a backup; or, to start over deliberately, "+
			"run \"edgelb cleanup\" (removes edgelb's kernel state) first: %w", path, what, tables, ErrStateGone)
	}
	log.Warn("no state yet: starting with an empty state (a first start). If edgelb ran here before, its REST-created pools, services and assignments are lost: stop it and restore the state file",
		"path", path, "file", what)
	return nil
}
