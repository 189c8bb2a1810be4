package conntrack

import (
	"fmt"

	"github.com/edgelb/edgelb/proxy/hostcheck"
	"github.com/edgelb/edgelb/proxy/sysctl"
)

// Sysctls the flow view needs, per network namespace: byte and packet
// counters (off by default, and only entries created after it is switched on
// get them) and start timestamps (so a flow's age survives a restart of edgelb).
var accountingSysctls = []hostcheck.Sysctl{
	{Name: "net.netfilter.nf_conntrack_acct", Want: "1", Why: "flows show byte and packet counts"},
	{Name: "net.netfilter.nf_conntrack_timestamp", Want: "1", Why: "a flow's age survives a restart of edgelb"},
}

// EnableAccounting switches on conntrack byte/packet accounting and start
// timestamps in the network namespace netnsFD (0: the caller's). Call it
// before traffic flows: counters are attached when a connection is created.
func EnableAccounting(netnsFD int) error {
	if err := sysctl.Ensure(netnsFD, accountingSysctls); err != nil {
		return fmt.Errorf("conntrack: %w", err)
	}
	return nil
}
