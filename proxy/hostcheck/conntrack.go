package hostcheck

import (
	"fmt"
	"strconv"
)

// Finding codes of CheckConntrack.
const (
	// CodeConntrackSmall (Warn): nf_conntrack_max is below twice the peak.
	CodeConntrackSmall = "conntrack-max-small"
	// CodeConntrackBuckets (Warn): the hash table is small for the max.
	CodeConntrackBuckets = "conntrack-buckets-small"
	// CodeConntrackOK (Info): table and hash size fit the peak.
	CodeConntrackOK = "conntrack-ok"
	// CodeConntrackAbsent (Info): nf_conntrack is not loaded yet.
	CodeConntrackAbsent = "conntrack-absent"
)

const (
	sysctlConntrackCount   = "net.netfilter.nf_conntrack_count"
	sysctlConntrackMax     = "net.netfilter.nf_conntrack_max"
	sysctlConntrackBuckets = "net.netfilter.nf_conntrack_buckets"
	// ConntrackFile is the sysctl.d file the printed fix writes (99-: after
	// any other file that sets the same value).
	ConntrackFile = "/etc/sysctl.d/99-edgelb-conntrack.conf"
	// ConntrackModprobeFile keeps the hash size across module loads: the
	// buckets are a module parameter, not a per-namespace sysctl.
	ConntrackModprobeFile = "/etc/modprobe.d/edgelb-conntrack.conf"
	// ConntrackHeadroom: the table should hold twice the expected peak. A
	// full table drops new connections ("nf_conntrack: table full, dropping
	// packet"); entries of closed connections linger in TIME_WAIT/CLOSE for
	// up to 120 s, and a SYN flood adds entries faster than real clients.
	ConntrackHeadroom = 2
	// ConntrackEntriesPerBucket is kube-proxy's ratio (hashsize = max/4):
	// with each entry hashed twice (both directions), chains stay ~8 long
	// when the table is full.
	ConntrackEntriesPerBucket = 4
)

// Conntrack is the namespace's connection-tracking table: its current
// size, its limit and the hash table's bucket count.
type Conntrack struct {
	Count, Max, Buckets uint64
}

// ReadConntrack reads nf_conntrack_count, _max and _buckets. They exist
// once the nf_conntrack module is loaded (fs.ErrNotExist in the chain
// before that).
func ReadConntrack(src Source) (Conntrack, error) {
	var c Conntrack
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{sysctlConntrackCount, &c.Count}, {sysctlConntrackMax, &c.Max}, {sysctlConntrackBuckets, &c.Buckets}} {
		v, err := ReadSysctl(src, f.name)
		if err != nil {
			return Conntrack{}, err
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Conntrack{}, fmt.Errorf("sysctl %s: %q is not a count", f.name, v)
		}
		*f.dst = n
	}
	return c, nil
}

// CheckConntrack compares the table with a peak of concurrent connections:
// the configured one (dataplane.conntrackPeak) or, when that is 0, the
// entries in the table now (a measurement, and says so). It never lowers a
// setting: the fix only raises what is too small.
func CheckConntrack(src Source, configuredPeak uint64) []Finding {
	c, err := ReadConntrack(src)
	if err != nil {
		if isNotExist(err) {
			return []Finding{{Severity: Info, Code: CodeConntrackAbsent,
				Message: "net.netfilter.nf_conntrack_* sysctls are absent: nf_conntrack is not loaded yet (the dataplane loads it)"}}
		}
		return []Finding{{Severity: Warn, Code: CodeSysctlGone, Message: err.Error()}}
	}
	return ConntrackFindings(c, configuredPeak)
}

// ConntrackFindings is CheckConntrack's pure core.
func ConntrackFindings(c Conntrack, configuredPeak uint64) []Finding {
	peak, from := configuredPeak, "dataplane.conntrackPeak"
	if peak == 0 {
		peak, from = c.Count, "entries now (nf_conntrack_count; set dataplane.conntrackPeak to check against the expected peak)"
	}
	wantMax := peak * ConntrackHeadroom
	fill := func(max uint64) string {
		if peak >= max {
			return fmt.Sprintf("full %d connections before the peak", peak-max)
		}
		return fmt.Sprintf("%.0f%% full", 100*float64(peak)/float64(max))
	}
	var out []Finding
	if c.Max < wantMax {
		out = append(out, Finding{Severity: Warn, Code: CodeConntrackSmall,
			Message: fmt.Sprintf("%s = %d is below %d× the peak of %d connections (%s): the table would be %s, and a full table drops new connections",
				sysctlConntrackMax, c.Max, ConntrackHeadroom, peak, from, fill(c.Max)),
			Fix: fmt.Sprintf("sysctl -w %s=%d\necho '%s = %d' > %s", sysctlConntrackMax, wantMax, sysctlConntrackMax, wantMax, ConntrackFile)})
	}
	// The buckets should fit the max that will be in effect after the fix.
	max := c.Max
	if wantMax > max {
		max = wantMax
	}
	if need := (max + ConntrackEntriesPerBucket - 1) / ConntrackEntriesPerBucket; c.Buckets < need {
		out = append(out, Finding{Severity: Warn, Code: CodeConntrackBuckets,
			Message: fmt.Sprintf("%s = %d is below %s/%d = %d: lookups walk long hash chains when the table fills",
				sysctlConntrackBuckets, c.Buckets, "nf_conntrack_max", ConntrackEntriesPerBucket, need),
			Fix: fmt.Sprintf("echo %d > /sys/module/nf_conntrack/parameters/hashsize\necho 'options nf_conntrack hashsize=%d' > %s", need, need, ConntrackModprobeFile)})
	}
	if len(out) == 0 {
		out = append(out, Finding{Severity: Info, Code: CodeConntrackOK,
			Message: fmt.Sprintf("%s = %d, %s = %d: %s at the peak of %d connections (%s)",
				sysctlConntrackMax, c.Max, sysctlConntrackBuckets, c.Buckets, fill(c.Max), peak, from)})
	}
	return out
}
