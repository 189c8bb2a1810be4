package daemon

import (
	"testing"

	"github.com/edgelb/edgelb/proxy/statesync"
)

func TestSyncReporter(t *testing.T) {
	f := statesync.NewFake()
	st := syncReporter{f}.Status()
	if st.Kind != "statesync" || len(st.Peers) != 1 || st.Peers[0].State != "running" {
		t.Fatalf("status %+v", st)
	}
}
